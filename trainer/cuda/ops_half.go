package cuda

import "github.com/loaderd/loaderd/trainer/tensor"

// Round rounds x in place to precision p and back (kernels/half.cu).
func (d *Device) Round(x tensor.Buffer, p tensor.Precision) {
	px, ok := d.fp("round", x, -1)
	if !ok {
		return
	}
	if p > tensor.FP16 {
		d.fail(argError("round", "unknown precision %v", p))
		return
	}
	if p == tensor.F32Exact || x.Len() == 0 {
		return
	}
	d.ptr(px)
	d.i32(x.Len())
	d.i32(int(p))
	d.elem("round", kRound, x.Len())
}

// NonFinite sets dst[0] = 1 when x holds ±Inf or NaN, else 0: a fill, then
// one grid-wide pass whose threads OR 1.0f's bits into dst on a find.
func (d *Device) NonFinite(dst, x tensor.Buffer) {
	px, ok1 := d.fp("nonfinite", x, -1)
	pz, ok2 := d.fp("nonfinite", dst, 1)
	if !ok1 || !ok2 {
		return
	}
	d.Fill(dst, 0)
	d.ptr(pz)
	d.ptr(px)
	d.i32(x.Len())
	d.elem("nonfinite", kNonFinite, max(1, x.Len()))
}
