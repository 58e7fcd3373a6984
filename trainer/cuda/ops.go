package cuda

import (
	"github.com/loaderd/loaderd/trainer/cuda/driver"
	"github.com/loaderd/loaderd/trainer/tensor"
)

// Kernel methods validate like the CPU device (same ArgError ops and
// reasons), then queue one launch; errors are sticky until Sync.

// dims records an error unless every shape argument is positive.
func (d *Device) dims(op string, a, b, c int) bool {
	if a <= 0 || b <= 0 || c <= 0 {
		d.fail(argError(op, "non-positive size in %d, %d, %d", a, b, c))
		return false
	}
	return true
}

// elem launches an elementwise kernel over n elements with the queued args.
func (d *Device) elem(op string, k kern, n int) {
	if !d.enter() {
		d.na = 0
		return
	}
	defer d.leave()
	d.launch(op, k, grid(int64(n)))
}

// Fill sets every element of x to v.
func (d *Device) Fill(x tensor.Buffer, v float32) {
	if p, ok := d.fp("fill", x, -1); ok {
		d.ptr(p)
		d.i32(x.Len())
		d.f32(v)
		d.elem("fill", kFill, x.Len())
	}
}

// Scale multiplies x by alpha.
func (d *Device) Scale(x tensor.Buffer, alpha float32) {
	if p, ok := d.fp("scale", x, -1); ok {
		d.ptr(p)
		d.i32(x.Len())
		d.f32(alpha)
		d.elem("scale", kScale, x.Len())
	}
}

// Axpy computes y += alpha·x.
func (d *Device) Axpy(alpha float32, x, y tensor.Buffer) {
	px, ok1 := d.fp("axpy", x, -1)
	py, ok2 := d.fp("axpy", y, x.Len())
	if ok1 && ok2 {
		d.ptr(py)
		d.ptr(px)
		d.i32(x.Len())
		d.f32(alpha)
		d.elem("axpy", kAxpy, x.Len())
	}
}

// Add computes dst = a + b.
func (d *Device) Add(dst, a, b tensor.Buffer) {
	pa, ok1 := d.fp("add", a, -1)
	pb, ok2 := d.fp("add", b, a.Len())
	pz, ok3 := d.fp("add", dst, a.Len())
	if ok1 && ok2 && ok3 {
		d.ptr(pz)
		d.ptr(pa)
		d.ptr(pb)
		d.i32(a.Len())
		d.elem("add", kAdd, a.Len())
	}
}

// DivScalar computes dst = src / den[0].
func (d *Device) DivScalar(dst, src, den tensor.Buffer) {
	px, ok1 := d.fp("divscalar", src, -1)
	pz, ok2 := d.fp("divscalar", dst, src.Len())
	pd, ok3 := d.fp("divscalar", den, 1)
	if ok1 && ok2 && ok3 {
		d.ptr(pz)
		d.ptr(px)
		d.ptr(pd)
		d.i32(src.Len())
		d.elem("divscalar", kDiv, src.Len())
	}
}

// ReLU computes y = max(x, 0).
func (d *Device) ReLU(y, x tensor.Buffer) {
	px, ok1 := d.fp("relu", x, -1)
	py, ok2 := d.fp("relu", y, x.Len())
	if ok1 && ok2 {
		d.ptr(py)
		d.ptr(px)
		d.i32(x.Len())
		d.elem("relu", kReLU, x.Len())
	}
}

// ReLUBackward computes dx = dy·[y > 0].
func (d *Device) ReLUBackward(dx, dy, y tensor.Buffer) {
	pg, ok1 := d.fp("relu_backward", dy, -1)
	py, ok2 := d.fp("relu_backward", y, dy.Len())
	pz, ok3 := d.fp("relu_backward", dx, dy.Len())
	if ok1 && ok2 && ok3 {
		d.ptr(pz)
		d.ptr(pg)
		d.ptr(py)
		d.i32(dy.Len())
		d.elem("relu_backward", kReLUB, dy.Len())
	}
}

// BNInvStd sets invstd = 1/sqrt(v + eps) (in double).
func (d *Device) BNInvStd(invstd, v tensor.Buffer, eps float32) {
	pv, ok1 := d.fp("bn_invstd", v, -1)
	pz, ok2 := d.fp("bn_invstd", invstd, v.Len())
	if ok1 && ok2 {
		d.ptr(pz)
		d.ptr(pv)
		d.i32(v.Len())
		d.f32(eps)
		d.elem("bn_invstd", kInvStd, v.Len())
	}
}

// BNRunning updates running mean and variance PyTorch's way.
func (d *Device) BNRunning(rmean, rvar, mean, v, cnt tensor.Buffer, momentum float32) {
	const op = "bn_running"
	n := mean.Len()
	pm, ok1 := d.fp(op, mean, -1)
	pv, ok2 := d.fp(op, v, n)
	prm, ok3 := d.fp(op, rmean, n)
	prv, ok4 := d.fp(op, rvar, n)
	pc, ok5 := d.fp(op, cnt, 1)
	if ok1 && ok2 && ok3 && ok4 && ok5 {
		d.ptr(prm)
		d.ptr(prv)
		d.ptr(pm)
		d.ptr(pv)
		d.ptr(pc)
		d.i32(n)
		d.f32(momentum)
		d.elem(op, kBNRunning, n)
	}
}

// AddBias adds bias[j] to x[o][j][·].
func (d *Device) AddBias(x, bias tensor.Buffer, outer, c, inner int) {
	if !d.dims("addbias", outer, c, inner) {
		return
	}
	px, ok1 := d.fp("addbias", x, outer*c*inner)
	pb, ok2 := d.fp("addbias", bias, c)
	if ok1 && ok2 {
		d.ptr(px)
		d.ptr(pb)
		d.i32(outer * c)
		d.i32(c)
		d.i32(inner)
		d.elem("addbias", kAddBias, outer*c*inner)
	}
}

// RowBroadcast sets dst[r][j] = alpha·x[r].
func (d *Device) RowBroadcast(dst, x tensor.Buffer, rows, cols int, alpha float32) {
	if !d.dims("rowbroadcast", rows, cols, 1) {
		return
	}
	px, ok1 := d.fp("rowbroadcast", x, rows)
	pz, ok2 := d.fp("rowbroadcast", dst, rows*cols)
	if ok1 && ok2 {
		d.ptr(pz)
		d.ptr(px)
		d.i32(rows)
		d.i32(cols)
		d.f32(alpha)
		d.elem("rowbroadcast", kRowBcast, rows*cols)
	}
}

// Transpose12 permutes [a][b][inner] to [b][a][inner].
func (d *Device) Transpose12(dst, src tensor.Buffer, a, b, inner int) {
	if !d.dims("transpose12", a, b, inner) {
		return
	}
	px, ok1 := d.fp("transpose12", src, a*b*inner)
	pz, ok2 := d.fp("transpose12", dst, a*b*inner)
	if ok1 && ok2 {
		d.ptr(pz)
		d.ptr(px)
		d.i32(a)
		d.i32(b)
		d.i32(inner)
		d.elem("transpose12", kT12, a*b*inner)
	}
}

// SGD applies one torch.optim.SGD update to p.
func (d *Device) SGD(p, g, buf tensor.Buffer, a tensor.SGDArgs) {
	pp, ok1 := d.fp("sgd", p, -1)
	pg, ok2 := d.fp("sgd", g, p.Len())
	var pb driver.DevicePtr // null when there is no momentum buffer
	if a.Momentum != 0 {
		b, ok := d.fp("sgd", buf, p.Len())
		if !ok {
			return
		}
		pb = b
	}
	if !ok1 || !ok2 {
		return
	}
	d.ptr(pp)
	d.ptr(pg)
	d.ptr(pb)
	d.i32(p.Len())
	d.f32(a.LR)
	d.f32(a.Momentum)
	d.f32(a.Dampening)
	d.f32(a.WeightDecay)
	d.i32(b2i(a.Nesterov))
	d.i32(b2i(a.First))
	d.elem("sgd", kSGD, p.Len())
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
