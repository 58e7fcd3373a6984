package tensor

import "math"

// kargs carries the arguments of the kernel being dispatched; each range
// function reads the fields its op uses. Keeping them in the device (one
// kernel at a time) is what lets dispatch allocate nothing.
type kargs struct {
	op                     kop
	x, y, z, u, v, t, s, r []float32
	lab                    []int32
	n, c, hw               int
	a, b                   float32
	cg                     ConvGeom
	pg                     PoolGeom
	sgd                    SGDArgs
	gemm                   gemmArgs
}

type kop uint8

const (
	opFill kop = iota
	opScale
	opAxpy
	opAdd
	opDiv
	opReLU
	opReLUB
	opInvStd
	opAddBias
	opRowSum
	opRowBcast
	opChanSum
	opChanSq
	opBNSums
	opRound
)

// elemGrain is the smallest slice worth handing to another goroutine.
const elemGrain = 1 << 14

func (d *CPU) elem(op kop, n int) {
	d.a.op = op
	d.par(n, elemGrain, d.fnElem)
}

func (d *CPU) elemRange(_, lo, hi int) {
	a := &d.a
	switch a.op {
	case opFill:
		x := a.x[lo:hi]
		for i := range x {
			x[i] = a.a
		}
	case opScale:
		x := a.x[lo:hi]
		for i := range x {
			x[i] *= a.a
		}
	case opAxpy:
		x, y := a.x[lo:hi], a.y[lo:hi]
		for i := range x {
			y[i] += a.a * x[i]
		}
	case opAdd:
		x, y, z := a.x[lo:hi], a.y[lo:hi], a.z[lo:hi]
		for i := range z {
			z[i] = x[i] + y[i]
		}
	case opDiv:
		x, z := a.x[lo:hi], a.z[lo:hi]
		for i := range z {
			z[i] = x[i] / a.a
		}
	case opReLU:
		// Branch-free on the bits: signs are random, branches mispredict,
		// and the max builtin's NaN/−0 rules cost more than this.
		x, y := a.x[lo:hi], a.y[lo:hi]
		for i := range x {
			b := math.Float32bits(x[i])
			y[i] = math.Float32frombits(b &^ uint32(int32(b)>>31))
		}
	case opReLUB:
		// y ≥ 0 here, so y > 0 exactly when its bits are non-zero (and
		// not negative, for NaN-free callers passing other data).
		dy, y, dx := a.x[lo:hi], a.y[lo:hi], a.z[lo:hi]
		for i := range dx {
			yb := int32(math.Float32bits(y[i]))
			m := uint32(-yb >> 31) // all ones when yb > 0
			dx[i] = math.Float32frombits(math.Float32bits(dy[i]) & m)
		}
	case opRound:
		roundRange(a.x[lo:hi], Precision(a.c))
	case opInvStd:
		v, z := a.x[lo:hi], a.z[lo:hi]
		for i := range z {
			z[i] = float32(1 / math.Sqrt(float64(v[i])+float64(a.a)))
		}
	}
}

// Fill sets every element of x to v.
func (d *CPU) Fill(x Buffer, v float32) {
	if d.a.x = d.fvAny("fill", x); d.a.x != nil {
		d.a.a = v
		d.elem(opFill, len(d.a.x))
	}
}

// Scale multiplies x by alpha.
func (d *CPU) Scale(x Buffer, alpha float32) {
	if d.a.x = d.fvAny("scale", x); d.a.x != nil {
		d.a.a = alpha
		d.elem(opScale, len(d.a.x))
	}
}

// Axpy computes y += alpha·x.
func (d *CPU) Axpy(alpha float32, x, y Buffer) {
	d.a.x = d.fvAny("axpy", x)
	d.a.y = d.fv("axpy", y, len(d.a.x))
	if d.a.x != nil && d.a.y != nil {
		d.a.a = alpha
		d.elem(opAxpy, len(d.a.x))
	}
}

// Add computes dst = a + b.
func (d *CPU) Add(dst, a, b Buffer) {
	d.a.x = d.fvAny("add", a)
	d.a.y = d.fv("add", b, len(d.a.x))
	d.a.z = d.fv("add", dst, len(d.a.x))
	if d.a.x != nil && d.a.y != nil && d.a.z != nil {
		d.elem(opAdd, len(d.a.x))
	}
}

// DivScalar computes dst = src / den[0].
func (d *CPU) DivScalar(dst, src, den Buffer) {
	d.a.x = d.fvAny("divscalar", src)
	d.a.z = d.fv("divscalar", dst, len(d.a.x))
	s := d.fv("divscalar", den, 1)
	if d.a.x != nil && d.a.z != nil && s != nil {
		d.a.a = s[0]
		d.elem(opDiv, len(d.a.x))
	}
}

// ReLU computes y = max(x, 0).
func (d *CPU) ReLU(y, x Buffer) {
	d.a.x = d.fvAny("relu", x)
	d.a.y = d.fv("relu", y, len(d.a.x))
	if d.a.x != nil && d.a.y != nil {
		d.elem(opReLU, len(d.a.x))
	}
}

// ReLUBackward computes dx = dy·[y > 0].
func (d *CPU) ReLUBackward(dx, dy, y Buffer) {
	d.a.x = d.fvAny("relu_backward", dy)
	d.a.y = d.fv("relu_backward", y, len(d.a.x))
	d.a.z = d.fv("relu_backward", dx, len(d.a.x))
	if d.a.x != nil && d.a.y != nil && d.a.z != nil {
		d.elem(opReLUB, len(d.a.x))
	}
}

// BNInvStd sets invstd = 1/sqrt(v + eps) (computed in float64).
func (d *CPU) BNInvStd(invstd, v Buffer, eps float32) {
	d.a.x = d.fvAny("bn_invstd", v)
	d.a.z = d.fv("bn_invstd", invstd, len(d.a.x))
	if d.a.x != nil && d.a.z != nil {
		d.a.a = eps
		d.elem(opInvStd, len(d.a.x))
	}
}

// BNRunning updates running mean and variance (few elements: no workers).
func (d *CPU) BNRunning(rmean, rvar, mean, v, cnt Buffer, momentum float32) {
	m := d.fvAny("bn_running", mean)
	vv := d.fv("bn_running", v, len(m))
	rm := d.fv("bn_running", rmean, len(m))
	rv := d.fv("bn_running", rvar, len(m))
	cn := d.fv("bn_running", cnt, 1)
	if m == nil || vv == nil || rm == nil || rv == nil || cn == nil {
		return
	}
	unb := float32(1)
	if cn[0] > 1 {
		unb = cn[0] / (cn[0] - 1)
	}
	for i := range m {
		rm[i] = (1-momentum)*rm[i] + momentum*m[i]
		rv[i] = (1-momentum)*rv[i] + momentum*vv[i]*unb
	}
}
