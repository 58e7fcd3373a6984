package nn

import (
	"fmt"

	"github.com/loaderd/loaderd/trainer/tensor"
)

// Linear computes y = x·Wᵀ + b for x of shape N×In×1×1 (PyTorch layout:
// W is Out×In).
type Linear struct {
	In, Out int
	w, b    Param
	hasBias bool
	x       Tensor
	y, dx   scratch
}

// NewLinear returns a Linear layer with Kaiming-initialised weight and a
// zero bias (bias may be turned off, e.g. before BatchNorm).
func NewLinear(in, out int, bias bool) *Linear {
	return &Linear{In: in, Out: out, hasBias: bias,
		w: Param{Name: "weight", Shape: []int{out, in}, Init: InitKaiming, FanIn: in},
		b: Param{Name: "bias", Shape: []int{out}, Init: InitZero}}
}

func (l *Linear) Params() []*Param {
	if l.hasBias {
		return []*Param{&l.w, &l.b}
	}
	return []*Param{&l.w}
}

func (l *Linear) Init(in Shape) (Shape, error) {
	if l.In <= 0 || l.Out <= 0 || in != (Shape{l.In, 1, 1}) {
		return Shape{}, shapeErr("linear", "input %v, want %d×1×1 (use Flatten)", in, l.In)
	}
	return Shape{l.Out, 1, 1}, nil
}

func (l *Linear) Forward(c *Ctx, x Tensor) (Tensor, error) {
	if err := checkIn("linear", x, Shape{l.In, 1, 1}); err != nil {
		return Tensor{}, err
	}
	y, err := l.y.out(c, x.N, Shape{l.Out, 1, 1})
	if err != nil {
		return Tensor{}, err
	}
	c.Dev.Gemm(tensor.NoTrans, tensor.Trans, x.N, l.Out, l.In, 1, x.Buf, l.In, l.w.W, l.In, 0, y.Buf, l.Out)
	if l.hasBias {
		c.Dev.AddBias(y.Buf, l.b.W, x.N, l.Out, 1)
	}
	c.half(y.Buf)
	l.x = x
	return y, c.Dev.Err()
}

func (l *Linear) Backward(c *Ctx, dy Tensor, needDx bool) (Tensor, error) {
	if dy.N != l.x.N || dy.Shape != (Shape{l.Out, 1, 1}) {
		return Tensor{}, fmt.Errorf("nn: linear backward of %d×%v after forward of %d: %w", dy.N, dy.Shape, l.x.N, ErrState)
	}
	n := dy.N
	c.Dev.Gemm(tensor.Trans, tensor.NoTrans, l.Out, l.In, n, 1, dy.Buf, l.Out, l.x.Buf, l.In, 0, l.w.G, l.In)
	if l.hasBias {
		c.Dev.ChannelSum(l.b.G, dy.Buf, n, l.Out, 1)
	}
	if !needDx {
		return Tensor{}, c.Dev.Err()
	}
	dx, err := l.dx.out(c, n, Shape{l.In, 1, 1})
	if err != nil {
		return Tensor{}, err
	}
	c.Dev.Gemm(tensor.NoTrans, tensor.NoTrans, n, l.In, l.Out, 1, dy.Buf, l.Out, l.w.W, l.In, 0, dx.Buf, l.In)
	c.half(dx.Buf)
	return dx, c.Dev.Err()
}
