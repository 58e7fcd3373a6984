package tensor

// Im2Col writes col[(c·KH+ky)·KW+kx][img·P + oy·OW+ox] for n images.
func (d *CPU) Im2Col(col, x Buffer, g ConvGeom, n int) {
	if !d.geomOK("im2col", g.valid(), n) {
		return
	}
	d.a.x = d.fv("im2col", x, n*g.C*g.H*g.W)
	d.a.z = d.fv("im2col", col, g.K()*n*g.P())
	if d.a.x != nil && d.a.z != nil && g.P() > 0 {
		d.a.cg, d.a.n = g, n
		d.par(g.K(), grainRows(n*g.P()), d.fnIm2Col)
	}
}

func (d *CPU) im2colRange(_, lo, hi int) {
	g, n, x := d.a.cg, d.a.n, d.a.x
	P, HW := g.P(), g.H*g.W
	for row := lo; row < hi; row++ {
		kx := row % g.KW
		ky := (row / g.KW) % g.KH
		c := row / (g.KW * g.KH)
		ox0, ox1 := validRange(g.OW, g.Stride, kx-g.Pad, g.W)
		out := d.a.z[row*n*P : (row+1)*n*P]
		for img := 0; img < n; img++ {
			plane := x[(img*g.C+c)*HW : (img*g.C+c+1)*HW]
			o := out[img*P : (img+1)*P]
			for oy := 0; oy < g.OH; oy++ {
				dst := o[oy*g.OW : (oy+1)*g.OW]
				iy := oy*g.Stride - g.Pad + ky
				if iy < 0 || iy >= g.H || ox0 >= ox1 {
					clear(dst)
					continue
				}
				clear(dst[:ox0])
				clear(dst[ox1:])
				src := plane[iy*g.W : (iy+1)*g.W]
				if g.Stride == 1 {
					copy(dst[ox0:ox1], src[ox0+kx-g.Pad:])
					continue
				}
				for ox := ox0; ox < ox1; ox++ {
					dst[ox] = src[ox*g.Stride+kx-g.Pad]
				}
			}
		}
	}
}

// validRange returns the outputs [o0, o1) of n whose input o·stride+off
// lies in [0, size), so the inner loops need no bounds tests.
func validRange(n, stride, off, size int) (o0, o1 int) {
	for o0 < n && o0*stride+off < 0 {
		o0++
	}
	o1 = o0
	for o1 < n && o1*stride+off < size {
		o1++
	}
	return o0, o1
}

// Col2Im sums col entries back into dx (overwritten), the adjoint of Im2Col.
func (d *CPU) Col2Im(dx, col Buffer, g ConvGeom, n int) {
	if !d.geomOK("col2im", g.valid(), n) {
		return
	}
	d.a.z = d.fv("col2im", dx, n*g.C*g.H*g.W)
	d.a.x = d.fv("col2im", col, g.K()*n*g.P())
	if d.a.x != nil && d.a.z != nil && g.P() > 0 {
		d.a.cg, d.a.n = g, n
		d.par(n*g.C, grainRows(g.K()/g.C*g.P()), d.fnCol2Im)
	}
}

func (d *CPU) col2imRange(_, lo, hi int) {
	g, n, col := d.a.cg, d.a.n, d.a.x
	P, HW := g.P(), g.H*g.W
	for pl := lo; pl < hi; pl++ { // pl = img·C + c
		img, c := pl/g.C, pl%g.C
		dst := d.a.z[pl*HW : (pl+1)*HW]
		clear(dst)
		for ky := 0; ky < g.KH; ky++ {
			for kx := 0; kx < g.KW; kx++ {
				row := (c*g.KH+ky)*g.KW + kx
				src := col[row*n*P+img*P : row*n*P+(img+1)*P]
				ox0, ox1 := validRange(g.OW, g.Stride, kx-g.Pad, g.W)
				if ox0 >= ox1 {
					continue
				}
				for oy := 0; oy < g.OH; oy++ {
					iy := oy*g.Stride - g.Pad + ky
					if iy < 0 || iy >= g.H {
						continue
					}
					drow := dst[iy*g.W : (iy+1)*g.W]
					srow := src[oy*g.OW+ox0 : oy*g.OW+ox1]
					if g.Stride == 1 {
						drow = drow[ox0+kx-g.Pad:]
						drow = drow[:len(srow)]
						for i, v := range srow {
							drow[i] += v
						}
						continue
					}
					for i, v := range srow {
						drow[(ox0+i)*g.Stride+kx-g.Pad] += v
					}
				}
			}
		}
	}
}

// MaxPool writes the window maxima and their in-plane input indices.
func (d *CPU) MaxPool(y, idx, x Buffer, g PoolGeom, n int) {
	if !d.geomOK("maxpool", g.valid(), n) {
		return
	}
	d.a.x = d.fv("maxpool", x, n*g.C*g.H*g.W)
	d.a.z = d.fv("maxpool", y, n*g.C*g.OH*g.OW)
	d.a.lab = d.iv("maxpool", idx, n*g.C*g.OH*g.OW)
	if d.a.x != nil && d.a.z != nil && d.a.lab != nil {
		d.a.pg = g
		d.par(n*g.C, grainRows(g.H*g.W), d.fnPool)
	}
}

func (d *CPU) poolRange(_, lo, hi int) {
	g := d.a.pg
	HW, OP := g.H*g.W, g.OH*g.OW
	for pl := lo; pl < hi; pl++ {
		x := d.a.x[pl*HW : (pl+1)*HW]
		y, ix := d.a.z[pl*OP:(pl+1)*OP], d.a.lab[pl*OP:(pl+1)*OP]
		for oy := 0; oy < g.OH; oy++ {
			for ox := 0; ox < g.OW; ox++ {
				b := oy*g.Stride*g.W + ox*g.Stride
				best, bi := x[b], b
				for ky := 0; ky < g.K; ky++ {
					for kx := 0; kx < g.K; kx++ {
						if v := x[b+ky*g.W+kx]; v > best {
							best, bi = v, b+ky*g.W+kx
						}
					}
				}
				y[oy*g.OW+ox], ix[oy*g.OW+ox] = best, int32(bi)
			}
		}
	}
}

// MaxPoolBackward routes dy to the recorded maxima (dx overwritten).
func (d *CPU) MaxPoolBackward(dx, dy, idx Buffer, g PoolGeom, n int) {
	if !d.geomOK("maxpool_backward", g.valid(), n) {
		return
	}
	d.a.z = d.fv("maxpool_backward", dx, n*g.C*g.H*g.W)
	d.a.x = d.fv("maxpool_backward", dy, n*g.C*g.OH*g.OW)
	d.a.lab = d.iv("maxpool_backward", idx, n*g.C*g.OH*g.OW)
	if d.a.x != nil && d.a.z != nil && d.a.lab != nil {
		d.a.pg = g
		d.par(n*g.C, grainRows(g.H*g.W), d.fnPoolB)
	}
}

func (d *CPU) poolBackRange(_, lo, hi int) {
	g := d.a.pg
	HW, OP := g.H*g.W, g.OH*g.OW
	for pl := lo; pl < hi; pl++ {
		dx := d.a.z[pl*HW : (pl+1)*HW]
		clear(dx)
		dy, ix := d.a.x[pl*OP:(pl+1)*OP], d.a.lab[pl*OP:(pl+1)*OP]
		for i, v := range dy {
			if j := int(ix[i]); j >= 0 && j < HW {
				dx[j] += v
			}
		}
	}
}

// geomOK records an error for a geometry not built by NewConvGeom or
// NewPoolGeom, or a non-positive image count.
func (d *CPU) geomOK(op string, valid bool, n int) bool {
	if !valid || n <= 0 {
		d.fail(argErr(op, "invalid geometry or count %d", n))
		return false
	}
	return true
}

// dims records an error unless every shape argument is positive, so that
// no product of negative sizes can pass a length check. (Fixed arity: a
// variadic slice would escape into the error and allocate on every call.)
func (d *CPU) dims(op string, a, b, c int) bool {
	if a <= 0 || b <= 0 || c <= 0 {
		d.fail(argErr(op, "non-positive size in %d, %d, %d", a, b, c))
		return false
	}
	return true
}
