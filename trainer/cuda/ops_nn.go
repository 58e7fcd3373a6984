package cuda

import (
	"github.com/loaderd/loaderd/trainer/tensor"
)

// blocks launches a one-block-per-output reduction with the queued args.
func (d *Device) blocks(op string, k kern, n int) {
	if !d.enter() {
		d.na = 0
		return
	}
	defer d.leave()
	d.launch(op, k, uint32(n))
}

// RowSum sets dst[r] = alpha·Σ_j x[r][j].
func (d *Device) RowSum(dst, x tensor.Buffer, rows, cols int, alpha float32) {
	if !d.dims("rowsum", rows, cols, 1) {
		return
	}
	px, ok1 := d.fp("rowsum", x, rows*cols)
	pz, ok2 := d.fp("rowsum", dst, rows)
	if ok1 && ok2 {
		d.ptr(pz)
		d.ptr(px)
		d.i32(rows)
		d.i32(cols)
		d.f32(alpha)
		d.blocks("rowsum", kRowSum, rows)
	}
}

// ChannelSum sets dst[j] = Σ_{o,i} x[o][j][i].
func (d *Device) ChannelSum(dst, x tensor.Buffer, outer, c, inner int) {
	if !d.dims("channelsum", outer, c, inner) {
		return
	}
	px, ok1 := d.fp("channelsum", x, outer*c*inner)
	pz, ok2 := d.fp("channelsum", dst, c)
	if ok1 && ok2 {
		d.ptr(pz)
		d.ptr(px)
		d.i32(outer)
		d.i32(c)
		d.i32(inner)
		d.splitReduce("channelsum", kChanSum, pz, 0, outer, c, inner)
	}
}

// ChannelSqDev sets dst[j] = Σ_{o,i} (x[o][j][i] − mean[j])².
func (d *Device) ChannelSqDev(dst, x, mean tensor.Buffer, outer, c, inner int) {
	if !d.dims("channelsqdev", outer, c, inner) {
		return
	}
	px, ok1 := d.fp("channelsqdev", x, outer*c*inner)
	pm, ok2 := d.fp("channelsqdev", mean, c)
	pz, ok3 := d.fp("channelsqdev", dst, c)
	if ok1 && ok2 && ok3 {
		d.ptr(pz)
		d.ptr(px)
		d.ptr(pm)
		d.i32(outer)
		d.i32(c)
		d.i32(inner)
		d.splitReduce("channelsqdev", kChanSq, pz, 0, outer, c, inner)
	}
}

// BNGradSums sets sdy = Σ dy and sdyx = Σ dy·(x−mean)·invstd per channel.
func (d *Device) BNGradSums(sdy, sdyx, dy, x, mean, invstd tensor.Buffer, n, c, hw int) {
	const op = "bn_gradsums"
	if !d.dims(op, n, c, hw) {
		return
	}
	px, ok1 := d.fp(op, x, n*c*hw)
	pg, ok2 := d.fp(op, dy, n*c*hw)
	pm, ok3 := d.fp(op, mean, c)
	pi, ok4 := d.fp(op, invstd, c)
	ps, ok5 := d.fp(op, sdy, c)
	pt, ok6 := d.fp(op, sdyx, c)
	if ok1 && ok2 && ok3 && ok4 && ok5 && ok6 {
		d.ptr(ps)
		d.ptr(pt)
		d.ptr(pg)
		d.ptr(px)
		d.ptr(pm)
		d.ptr(pi)
		d.i32(n)
		d.i32(c)
		d.i32(hw)
		d.splitReduce(op, kBNSums, ps, pt, n, c, hw)
	}
}

// BNForward sets y = gamma·(x−mean)·invstd + beta.
func (d *Device) BNForward(y, x, mean, invstd, gamma, beta tensor.Buffer, n, c, hw int) {
	const op = "bn_forward"
	if !d.dims(op, n, c, hw) {
		return
	}
	px, ok1 := d.fp(op, x, n*c*hw)
	py, ok2 := d.fp(op, y, n*c*hw)
	pm, ok3 := d.fp(op, mean, c)
	pi, ok4 := d.fp(op, invstd, c)
	pg, ok5 := d.fp(op, gamma, c)
	pb, ok6 := d.fp(op, beta, c)
	if ok1 && ok2 && ok3 && ok4 && ok5 && ok6 {
		d.ptr(py)
		d.ptr(px)
		d.ptr(pm)
		d.ptr(pi)
		d.ptr(pg)
		d.ptr(pb)
		d.i32(n * c)
		d.i32(c)
		d.i32(hw)
		d.elem(op, kBNFwd, n*c*hw)
	}
}

// BNBackward sets dx = gamma·invstd·(dy − sdy/M − x̂·sdyx/M), M = cnt[0].
func (d *Device) BNBackward(dx, dy, x, mean, invstd, gamma, sdy, sdyx, cnt tensor.Buffer, n, c, hw int) {
	const op = "bn_backward"
	if !d.dims(op, n, c, hw) {
		return
	}
	px, ok1 := d.fp(op, x, n*c*hw)
	pg, ok2 := d.fp(op, dy, n*c*hw)
	pz, ok3 := d.fp(op, dx, n*c*hw)
	pm, ok4 := d.fp(op, mean, c)
	pi, ok5 := d.fp(op, invstd, c)
	pga, ok6 := d.fp(op, gamma, c)
	ps, ok7 := d.fp(op, sdy, c)
	pt, ok8 := d.fp(op, sdyx, c)
	pc, ok9 := d.fp(op, cnt, 1)
	if ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7 && ok8 && ok9 {
		for _, p := range [...]uint64{uint64(pz), uint64(pg), uint64(px), uint64(pm),
			uint64(pi), uint64(pga), uint64(ps), uint64(pt), uint64(pc)} {
			d.arg(p)
		}
		d.i32(n * c)
		d.i32(c)
		d.i32(hw)
		d.elem(op, kBNBwd, n*c*hw)
	}
}

// convGeomOK and poolGeomOK accept only geometries the constructors build.
func convGeomOK(g tensor.ConvGeom) bool {
	h, err := tensor.NewConvGeom(g.C, g.H, g.W, g.KH, g.KW, g.Stride, g.Pad)
	return err == nil && h == g
}

func poolGeomOK(g tensor.PoolGeom) bool {
	h, err := tensor.NewPoolGeom(g.C, g.H, g.W, g.K, g.Stride)
	return err == nil && h == g
}

func (d *Device) geomOK(op string, valid bool, n int) bool {
	if !valid || n <= 0 {
		d.fail(argError(op, "invalid geometry or count %d", n))
		return false
	}
	return true
}

func (d *Device) convArgs(g tensor.ConvGeom, n int) {
	for _, v := range [...]int{n, g.C, g.H, g.W, g.KH, g.KW, g.Stride, g.Pad, g.OH, g.OW} {
		d.i32(v)
	}
}

// Im2Col lays n images out as columns (see tensor.Device).
func (d *Device) Im2Col(col, x tensor.Buffer, g tensor.ConvGeom, n int) {
	if !d.geomOK("im2col", convGeomOK(g), n) {
		return
	}
	px, ok1 := d.fp("im2col", x, n*g.C*g.H*g.W)
	pc, ok2 := d.fp("im2col", col, g.K()*n*g.P())
	if ok1 && ok2 {
		d.ptr(pc)
		d.ptr(px)
		d.convArgs(g, n)
		d.elem("im2col", kIm2Col, g.K()*n*g.P())
	}
}

// Col2Im is the adjoint of Im2Col (dx overwritten).
func (d *Device) Col2Im(dx, col tensor.Buffer, g tensor.ConvGeom, n int) {
	if !d.geomOK("col2im", convGeomOK(g), n) {
		return
	}
	pz, ok1 := d.fp("col2im", dx, n*g.C*g.H*g.W)
	pc, ok2 := d.fp("col2im", col, g.K()*n*g.P())
	if ok1 && ok2 {
		d.ptr(pz)
		d.ptr(pc)
		d.convArgs(g, n)
		d.elem("col2im", kCol2Im, n*g.C*g.H*g.W)
	}
}

func (d *Device) poolArgs(g tensor.PoolGeom, n int) {
	for _, v := range [...]int{n * g.C, g.H, g.W, g.K, g.Stride, g.OH, g.OW} {
		d.i32(v)
	}
}

// MaxPool writes window maxima and their in-plane indices.
func (d *Device) MaxPool(y, idx, x tensor.Buffer, g tensor.PoolGeom, n int) {
	if !d.geomOK("maxpool", poolGeomOK(g), n) {
		return
	}
	out := n * g.C * g.OH * g.OW
	px, ok1 := d.fp("maxpool", x, n*g.C*g.H*g.W)
	py, ok2 := d.fp("maxpool", y, out)
	pi, ok3 := d.check("maxpool", idx, tensor.I32, out)
	if ok1 && ok2 && ok3 {
		d.ptr(py)
		d.ptr(pi)
		d.ptr(px)
		d.poolArgs(g, n)
		d.elem("maxpool", kPool, out)
	}
}

// MaxPoolBackward routes dy to the recorded maxima (dx overwritten).
func (d *Device) MaxPoolBackward(dx, dy, idx tensor.Buffer, g tensor.PoolGeom, n int) {
	const op = "maxpool_backward"
	if !d.geomOK(op, poolGeomOK(g), n) {
		return
	}
	out := n * g.C * g.OH * g.OW
	pz, ok1 := d.fp(op, dx, n*g.C*g.H*g.W)
	pg, ok2 := d.fp(op, dy, out)
	pi, ok3 := d.check(op, idx, tensor.I32, out)
	if ok1 && ok2 && ok3 {
		d.ptr(pz)
		d.ptr(pg)
		d.ptr(pi)
		d.poolArgs(g, n)
		d.elem(op, kPoolB, n*g.C*g.H*g.W)
	}
}

// SoftmaxCE computes softmax rows and smoothed cross-entropy per row. A
// label outside [0, c) is reported by the next Sync.
func (d *Device) SoftmaxCE(loss, prob, logits, labels tensor.Buffer, n, c int, eps float32) {
	const op = "softmax_ce"
	if !d.dims(op, n, c, 1) {
		return
	}
	px, ok1 := d.fp(op, logits, n*c)
	pp, ok2 := d.fp(op, prob, n*c)
	pl, ok3 := d.fp(op, loss, n)
	pb, ok4 := d.check(op, labels, tensor.I32, n)
	if ok1 && ok2 && ok3 && ok4 {
		d.ptr(pl)
		d.ptr(pp)
		d.ptr(px)
		d.ptr(pb)
		d.ptr(d.status)
		d.i32(n)
		d.i32(c)
		d.f32(eps)
		d.noteStatus(op)
		d.elem(op, kCE, n)
	}
}

// SoftmaxCEBackward sets dlogits = scale·(prob − q).
func (d *Device) SoftmaxCEBackward(dlogits, prob, labels tensor.Buffer, n, c int, eps, scale float32) {
	const op = "softmax_ce_backward"
	if !d.dims(op, n, c, 1) {
		return
	}
	pp, ok1 := d.fp(op, prob, n*c)
	pz, ok2 := d.fp(op, dlogits, n*c)
	pb, ok3 := d.check(op, labels, tensor.I32, n)
	if ok1 && ok2 && ok3 {
		d.ptr(pz)
		d.ptr(pp)
		d.ptr(pb)
		d.ptr(d.status)
		d.i32(n)
		d.i32(c)
		d.f32(eps)
		d.f32(scale)
		d.noteStatus(op)
		d.elem(op, kCEB, n*c)
	}
}

func (d *Device) noteStatus(op string) {
	if d.statusOp == "" {
		d.statusOp = op
	}
}

// CountCorrect sets dst[0] to the number of rows whose arg-max is the label.
func (d *Device) CountCorrect(dst, logits, labels tensor.Buffer, n, c int) {
	const op = "count_correct"
	if !d.dims(op, n, c, 1) {
		return
	}
	px, ok1 := d.fp(op, logits, n*c)
	pz, ok2 := d.fp(op, dst, 1)
	pb, ok3 := d.check(op, labels, tensor.I32, n)
	if ok1 && ok2 && ok3 {
		d.ptr(pz)
		d.ptr(px)
		d.ptr(pb)
		d.i32(n)
		d.i32(c)
		d.blocks(op, kCount1, 1)
	}
}
