package nn

import (
	"fmt"

	"github.com/loaderd/loaderd/trainer/tensor"
)

// convChunkFloats bounds the im2col scratch of one chunk of images (col
// plus the transposed output), so the working set stays in cache; a
// device that is a tensor.ScratchSizer sets its own bound.
var convChunkFloats = 1 << 19

// Conv2d is a 2-D convolution: one call per pass on a tensor.Convolver
// (cuDNN), else im2col + GEMM in chunks of images. W is Cout×Cin×K×K.
type Conv2d struct {
	Cin, Cout, K, Stride, Pad int
	w, b                      Param
	hasBias                   bool
	g                         tensor.ConvGeom
	in, out                   Shape
	x                         Tensor
	y, dx                     scratch
}

// NewConv2d returns a square-kernel convolution with Kaiming-initialised
// weights; bias is usually off when BatchNorm follows.
func NewConv2d(cin, cout, k, stride, pad int, bias bool) *Conv2d {
	fan := cin * k * k
	return &Conv2d{Cin: cin, Cout: cout, K: k, Stride: stride, Pad: pad, hasBias: bias,
		w: Param{Name: "weight", Shape: []int{cout, cin, k, k}, Init: InitKaiming, FanIn: fan},
		b: Param{Name: "bias", Shape: []int{cout}, Init: InitZero}}
}

func (l *Conv2d) Params() []*Param {
	if l.hasBias {
		return []*Param{&l.w, &l.b}
	}
	return []*Param{&l.w}
}

func (l *Conv2d) Init(in Shape) (Shape, error) {
	if in.C != l.Cin || l.Cout <= 0 {
		return Shape{}, shapeErr("conv2d", "input %v, want %d channels", in, l.Cin)
	}
	g, err := tensor.NewConvGeom(in.C, in.H, in.W, l.K, l.K, l.Stride, l.Pad)
	if err != nil {
		return Shape{}, fmt.Errorf("nn: conv2d: %w", err)
	}
	l.g, l.in, l.out = g, in, Shape{l.Cout, g.OH, g.OW}
	return l.out, nil
}

// chunk returns how many images to lower at once, and the scratch for them.
func (l *Conv2d) chunk(c *Ctx, n int) (int, tensor.Buffer, error) {
	per := (l.g.K() + l.Cout) * l.g.P()
	budget := convChunkFloats
	if s, ok := c.Dev.(tensor.ScratchSizer); ok {
		budget = s.ScratchFloats()
	}
	nb := max(1, min(n, budget/per))
	ws, err := c.Workspace(nb * per)
	return nb, ws, err
}

func (l *Conv2d) Forward(c *Ctx, x Tensor) (Tensor, error) {
	if err := checkIn("conv2d", x, l.in); err != nil {
		return Tensor{}, err
	}
	y, err := l.y.out(c, x.N, l.out)
	if err != nil {
		return Tensor{}, err
	}
	d := c.Dev
	if cv, ok := d.(tensor.Convolver); ok && cv.Convolutions() {
		cv.ConvForward(y.Buf, x.Buf, l.w.W, l.g, l.Cout, x.N)
		return l.finish(c, x, y)
	}
	nb, ws, err := l.chunk(c, x.N)
	if err != nil {
		return Tensor{}, err
	}
	K, P, is, os := l.g.K(), l.g.P(), l.in.Size(), l.out.Size()
	for i0 := 0; i0 < x.N; i0 += nb {
		b := min(nb, x.N-i0)
		col := ws.Slice(0, K*b*P)
		ys := y.Buf.Slice(i0*os, b*os)
		d.Im2Col(col, x.Buf.Slice(i0*is, b*is), l.g, b)
		if b == 1 { // one image: [Cout][P] is already NCHW
			d.Gemm(tensor.NoTrans, tensor.NoTrans, l.Cout, P, K, 1, l.w.W, K, col, P, 0, ys, P)
			continue
		}
		tmp := ws.Slice(K*nb*P, l.Cout*b*P)
		d.Gemm(tensor.NoTrans, tensor.NoTrans, l.Cout, b*P, K, 1, l.w.W, K, col, b*P, 0, tmp, b*P)
		d.Transpose12(ys, tmp, l.Cout, b, P)
	}
	return l.finish(c, x, y)
}

// finish adds the bias to y and keeps x for Backward.
func (l *Conv2d) finish(c *Ctx, x, y Tensor) (Tensor, error) {
	if l.hasBias {
		c.Dev.AddBias(y.Buf, l.b.W, x.N, l.Cout, l.g.P())
	}
	c.half(y.Buf)
	l.x = x
	return y, c.Dev.Err()
}

func (l *Conv2d) Backward(c *Ctx, dy Tensor, needDx bool) (Tensor, error) {
	if dy.N != l.x.N || dy.Shape != l.out {
		return Tensor{}, fmt.Errorf("nn: conv2d backward of %d×%v after forward of %d: %w", dy.N, dy.Shape, l.x.N, ErrState)
	}
	n := dy.N
	var dx Tensor
	if needDx {
		var err error
		if dx, err = l.dx.out(c, n, l.in); err != nil {
			return Tensor{}, err
		}
	}
	d := c.Dev
	if cv, ok := d.(tensor.Convolver); ok && cv.Convolutions() {
		cv.ConvBackwardFilter(l.w.G, l.x.Buf, dy.Buf, l.g, l.Cout, n, 0)
		if needDx {
			cv.ConvBackwardData(dx.Buf, dy.Buf, l.w.W, l.g, l.Cout, n)
		}
		return l.finishBackward(c, dy, dx)
	}
	nb, ws, err := l.chunk(c, n)
	if err != nil {
		return Tensor{}, err
	}
	K, P, is, os := l.g.K(), l.g.P(), l.in.Size(), l.out.Size()
	for i0 := 0; i0 < n; i0 += nb {
		b := min(nb, n-i0)
		col := ws.Slice(0, K*b*P)
		dys := dy.Buf.Slice(i0*os, b*os)
		tmp := dys // [Cout][b·P]; for one image NCHW already is that
		if b > 1 {
			tmp = ws.Slice(K*nb*P, l.Cout*b*P)
			d.Transpose12(tmp, dys, b, l.Cout, P)
		}
		d.Im2Col(col, l.x.Buf.Slice(i0*is, b*is), l.g, b)
		beta := float32(1)
		if i0 == 0 {
			beta = 0
		}
		d.Gemm(tensor.NoTrans, tensor.Trans, l.Cout, K, b*P, 1, tmp, b*P, col, b*P, beta, l.w.G, K)
		if needDx {
			d.Gemm(tensor.Trans, tensor.NoTrans, K, b*P, l.Cout, 1, l.w.W, K, tmp, b*P, 0, col, b*P)
			d.Col2Im(dx.Buf.Slice(i0*is, b*is), col, l.g, b)
		}
	}
	return l.finishBackward(c, dy, dx)
}

// finishBackward sums the bias gradient and rounds dx as AMP would.
func (l *Conv2d) finishBackward(c *Ctx, dy, dx Tensor) (Tensor, error) {
	if l.hasBias {
		c.Dev.ChannelSum(l.b.G, dy.Buf, dy.N, l.Cout, l.g.P())
	}
	c.half(dx.Buf)
	return dx, c.Dev.Err()
}
