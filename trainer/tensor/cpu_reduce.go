package tensor

// Row-structured kernels: tensors viewed as [outer][c][inner] or rows×cols.
// Reductions accumulate in float64 so that results do not depend on batch
// size through rounding, which keeps the multi-device equivalence tight.

func grainRows(inner int) int { return max(1, elemGrain/max(1, inner)) }

func (d *CPU) rows(op kop, rows, inner int) {
	d.a.op = op
	d.par(rows, grainRows(inner), d.fnRow)
}

func (d *CPU) rowRange(_, lo, hi int) {
	a := &d.a
	in := a.hw
	for r := lo; r < hi; r++ {
		switch a.op {
		case opAddBias:
			b := a.y[r%a.c]
			x := a.x[r*in : r*in+in]
			for i := range x {
				x[i] += b
			}
		case opRowSum:
			a.z[r] = a.a * float32(sum64(a.x[r*in:r*in+in]))
		case opRowBcast:
			v := a.a * a.x[r]
			z := a.z[r*in : r*in+in]
			for i := range z {
				z[i] = v
			}
		}
	}
}

// AddBias adds bias[j] to x[o][j][·].
func (d *CPU) AddBias(x, bias Buffer, outer, c, inner int) {
	if !d.dims("addbias", outer, c, inner) {
		return
	}
	d.a.x = d.fv("addbias", x, outer*c*inner)
	d.a.y = d.fv("addbias", bias, c)
	if d.a.x != nil && d.a.y != nil && inner > 0 {
		d.a.c, d.a.hw = c, inner
		d.rows(opAddBias, outer*c, inner)
	}
}

// RowSum sets dst[r] = alpha·Σ_j x[r][j].
func (d *CPU) RowSum(dst, x Buffer, rows, cols int, alpha float32) {
	if !d.dims("rowsum", rows, cols, 1) {
		return
	}
	d.a.x = d.fv("rowsum", x, rows*cols)
	d.a.z = d.fv("rowsum", dst, rows)
	if d.a.x != nil && d.a.z != nil && cols > 0 {
		d.a.hw, d.a.a = cols, alpha
		d.rows(opRowSum, rows, cols)
	}
}

// RowBroadcast sets dst[r][j] = alpha·x[r].
func (d *CPU) RowBroadcast(dst, x Buffer, rows, cols int, alpha float32) {
	if !d.dims("rowbroadcast", rows, cols, 1) {
		return
	}
	d.a.x = d.fv("rowbroadcast", x, rows)
	d.a.z = d.fv("rowbroadcast", dst, rows*cols)
	if d.a.x != nil && d.a.z != nil && cols > 0 {
		d.a.hw, d.a.a = cols, alpha
		d.rows(opRowBcast, rows, cols)
	}
}

func (d *CPU) chans(op kop, outer, c, inner int) {
	d.a.op, d.a.n, d.a.c, d.a.hw = op, outer, c, inner
	d.par(c, grainRows(outer*inner), d.fnChan)
}

func (d *CPU) chanRange(_, lo, hi int) {
	a := &d.a
	n, c, hw := a.n, a.c, a.hw
	for j := lo; j < hi; j++ {
		var s, s2 float64
		for o := 0; o < n; o++ {
			off := (o*c + j) * hw
			x := a.x[off : off+hw]
			switch a.op {
			case opChanSum:
				s += sum64(x)
			case opChanSq:
				s += sqDev64(x, a.y[j])
			case opBNSums:
				t, t2 := dotSums64(a.v[off:off+hw], x, a.y[j], a.u[j])
				s, s2 = s+t, s2+t2
			}
		}
		a.z[j] = float32(s)
		if a.op == opBNSums {
			a.t[j] = float32(s2)
		}
	}
}

// The reductions below keep four independent float64 partial sums so the
// adds pipeline instead of waiting on one dependency chain.

func sum64(x []float32) float64 {
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+3 < len(x); i += 4 {
		s0 += float64(x[i])
		s1 += float64(x[i+1])
		s2 += float64(x[i+2])
		s3 += float64(x[i+3])
	}
	for ; i < len(x); i++ {
		s0 += float64(x[i])
	}
	return (s0 + s1) + (s2 + s3)
}

func sqDev64(x []float32, m float32) float64 {
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+3 < len(x); i += 4 {
		e0, e1, e2, e3 := float64(x[i]-m), float64(x[i+1]-m), float64(x[i+2]-m), float64(x[i+3]-m)
		s0 += e0 * e0
		s1 += e1 * e1
		s2 += e2 * e2
		s3 += e3 * e3
	}
	for ; i < len(x); i++ {
		e := float64(x[i] - m)
		s0 += e * e
	}
	return (s0 + s1) + (s2 + s3)
}

// dotSums64 returns Σdy and Σdy·(x−m)·is.
func dotSums64(dy, x []float32, m, is float32) (float64, float64) {
	var a0, a1, b0, b1 float64
	dy = dy[:len(x)]
	i := 0
	for ; i+1 < len(x); i += 2 {
		g0, g1 := float64(dy[i]), float64(dy[i+1])
		a0 += g0
		a1 += g1
		b0 += g0 * float64((x[i]-m)*is)
		b1 += g1 * float64((x[i+1]-m)*is)
	}
	for ; i < len(x); i++ {
		g := float64(dy[i])
		a0 += g
		b0 += g * float64((x[i]-m)*is)
	}
	return a0 + a1, b0 + b1
}

// ChannelSum sets dst[j] = Σ_{o,i} x[o][j][i].
func (d *CPU) ChannelSum(dst, x Buffer, outer, c, inner int) {
	if !d.dims("channelsum", outer, c, inner) {
		return
	}
	d.a.x = d.fv("channelsum", x, outer*c*inner)
	d.a.z = d.fv("channelsum", dst, c)
	if d.a.x != nil && d.a.z != nil {
		d.chans(opChanSum, outer, c, inner)
	}
}

// ChannelSqDev sets dst[j] = Σ_{o,i} (x[o][j][i] − mean[j])².
func (d *CPU) ChannelSqDev(dst, x, mean Buffer, outer, c, inner int) {
	if !d.dims("channelsqdev", outer, c, inner) {
		return
	}
	d.a.x = d.fv("channelsqdev", x, outer*c*inner)
	d.a.y = d.fv("channelsqdev", mean, c)
	d.a.z = d.fv("channelsqdev", dst, c)
	if d.a.x != nil && d.a.y != nil && d.a.z != nil {
		d.chans(opChanSq, outer, c, inner)
	}
}

// BNGradSums sets sdy = Σ dy and sdyx = Σ dy·(x−mean)·invstd per channel.
func (d *CPU) BNGradSums(sdy, sdyx, dy, x, mean, invstd Buffer, n, c, hw int) {
	if !d.dims("bn_gradsums", n, c, hw) {
		return
	}
	a := &d.a
	a.x = d.fv("bn_gradsums", x, n*c*hw)
	a.v = d.fv("bn_gradsums", dy, n*c*hw)
	a.y = d.fv("bn_gradsums", mean, c)
	a.u = d.fv("bn_gradsums", invstd, c)
	a.z = d.fv("bn_gradsums", sdy, c)
	a.t = d.fv("bn_gradsums", sdyx, c)
	if a.x != nil && a.v != nil && a.y != nil && a.u != nil && a.z != nil && a.t != nil {
		d.chans(opBNSums, n, c, hw)
	}
}

// BNForward sets y = gamma·(x−mean)·invstd + beta.
func (d *CPU) BNForward(y, x, mean, invstd, gamma, beta Buffer, n, c, hw int) {
	if !d.dims("bn_forward", n, c, hw) {
		return
	}
	a := &d.a
	a.x = d.fv("bn_forward", x, n*c*hw)
	a.z = d.fv("bn_forward", y, n*c*hw)
	a.y = d.fv("bn_forward", mean, c)
	a.u = d.fv("bn_forward", invstd, c)
	a.v = d.fv("bn_forward", gamma, c)
	a.t = d.fv("bn_forward", beta, c)
	if a.x != nil && a.z != nil && a.y != nil && a.u != nil && a.v != nil && a.t != nil && hw > 0 {
		a.c, a.hw = c, hw
		d.par(n*c, grainRows(hw), d.fnBN)
	}
}

func (d *CPU) bnRange(_, lo, hi int) {
	a := &d.a
	hw := a.hw
	for r := lo; r < hi; r++ {
		j := r % a.c
		k := a.v[j] * a.u[j]
		b := a.t[j] - a.y[j]*k
		x, y := a.x[r*hw:r*hw+hw], a.z[r*hw:r*hw+hw]
		for i, v := range x {
			y[i] = v*k + b
		}
	}
}

// BNBackward sets dx = gamma·invstd·(dy − sdy/M − x̂·sdyx/M), M = cnt[0].
func (d *CPU) BNBackward(dx, dy, x, mean, invstd, gamma, sdy, sdyx, cnt Buffer, n, c, hw int) {
	if !d.dims("bn_backward", n, c, hw) {
		return
	}
	a := &d.a
	a.x = d.fv("bn_backward", x, n*c*hw)
	a.v = d.fv("bn_backward", dy, n*c*hw)
	a.z = d.fv("bn_backward", dx, n*c*hw)
	a.y = d.fv("bn_backward", mean, c)
	a.u = d.fv("bn_backward", invstd, c)
	a.t = d.fv("bn_backward", gamma, c)
	a.s = d.fv("bn_backward", sdy, c)
	a.r = d.fv("bn_backward", sdyx, c)
	m := d.fv("bn_backward", cnt, 1)
	if a.x == nil || a.v == nil || a.z == nil || a.y == nil || a.u == nil ||
		a.t == nil || a.s == nil || a.r == nil || m == nil || hw <= 0 {
		return
	}
	a.c, a.hw, a.a = c, hw, 1/m[0]
	d.par(n*c, grainRows(hw), d.fnBNB)
}

func (d *CPU) bnBackRange(_, lo, hi int) {
	a := &d.a
	hw := a.hw
	for r := lo; r < hi; r++ {
		j := r % a.c
		is := a.u[j]
		k := a.t[j] * is
		mdy := a.s[j] * a.a
		mdx := a.r[j] * a.a * is
		m := a.y[j]
		x, dy, dx := a.x[r*hw:r*hw+hw], a.v[r*hw:r*hw+hw], a.z[r*hw:r*hw+hw]
		for i, v := range x {
			dx[i] = k * (dy[i] - mdy - (v-m)*mdx)
		}
	}
}

// Transpose12 permutes [a][b][inner] to [b][a][inner].
func (d *CPU) Transpose12(dst, src Buffer, a, b, inner int) {
	if !d.dims("transpose12", a, b, inner) {
		return
	}
	d.a.x = d.fv("transpose12", src, a*b*inner)
	d.a.z = d.fv("transpose12", dst, a*b*inner)
	if d.a.x != nil && d.a.z != nil && inner > 0 {
		d.a.n, d.a.c, d.a.hw = a, b, inner
		d.par(a*b, grainRows(inner), d.fnT12)
	}
}

func (d *CPU) t12Range(_, lo, hi int) {
	a := &d.a
	in := a.hw
	for r := lo; r < hi; r++ { // r indexes dst rows: r = j·A + i
		j, i := r/a.n, r%a.n
		s := (i*a.c + j) * in
		copy(a.z[r*in:r*in+in], a.x[s:s+in])
	}
}
