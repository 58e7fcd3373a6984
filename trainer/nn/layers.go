package nn

import (
	"fmt"

	"github.com/loaderd/loaderd/trainer/tensor"
)

func backErr(layer string, dy Tensor, n int) error {
	return fmt.Errorf("nn: %s backward of %d×%v after forward of %d: %w", layer, dy.N, dy.Shape, n, ErrState)
}

// ReLU is max(x, 0).
type ReLU struct {
	sh    Shape
	y     Tensor
	ys, d scratch
}

func NewReLU() *ReLU                         { return &ReLU{} }
func (r *ReLU) Params() []*Param             { return nil }
func (r *ReLU) Init(in Shape) (Shape, error) { r.sh = in; return in, nil }
func (r *ReLU) Forward(c *Ctx, x Tensor) (Tensor, error) {
	if err := checkIn("relu", x, r.sh); err != nil {
		return Tensor{}, err
	}
	y, err := r.ys.out(c, x.N, r.sh)
	if err != nil {
		return Tensor{}, err
	}
	c.Dev.ReLU(y.Buf, x.Buf)
	r.y = y
	return y, c.Dev.Err()
}

func (r *ReLU) Backward(c *Ctx, dy Tensor, needDx bool) (Tensor, error) {
	if dy.N != r.y.N || dy.Shape != r.sh {
		return Tensor{}, backErr("relu", dy, r.y.N)
	}
	if !needDx {
		return Tensor{}, nil
	}
	dx, err := r.d.out(c, dy.N, r.sh)
	if err != nil {
		return Tensor{}, err
	}
	c.Dev.ReLUBackward(dx.Buf, dy.Buf, r.y.Buf)
	return dx, c.Dev.Err()
}

// Flatten reshapes N×C×H×W to N×(C·H·W)×1×1 without copying.
type Flatten struct{ in Shape }

func NewFlatten() *Flatten                      { return &Flatten{} }
func (f *Flatten) Params() []*Param             { return nil }
func (f *Flatten) Init(in Shape) (Shape, error) { f.in = in; return Shape{in.Size(), 1, 1}, nil }
func (f *Flatten) Forward(_ *Ctx, x Tensor) (Tensor, error) {
	if err := checkIn("flatten", x, f.in); err != nil {
		return Tensor{}, err
	}
	return Tensor{Buf: x.Buf, N: x.N, Shape: Shape{f.in.Size(), 1, 1}}, nil
}

func (f *Flatten) Backward(_ *Ctx, dy Tensor, _ bool) (Tensor, error) {
	if dy.Len() != dy.N*f.in.Size() || dy.Buf.Len() != dy.Len() {
		return Tensor{}, backErr("flatten", dy, dy.N)
	}
	return Tensor{Buf: dy.Buf, N: dy.N, Shape: f.in}, nil
}

// GlobalAvgPool averages each channel plane: N×C×H×W → N×C×1×1.
type GlobalAvgPool struct {
	in    Shape
	n     int
	y, dx scratch
}

func NewGlobalAvgPool() *GlobalAvgPool                { return &GlobalAvgPool{} }
func (g *GlobalAvgPool) Params() []*Param             { return nil }
func (g *GlobalAvgPool) Init(in Shape) (Shape, error) { g.in = in; return Shape{in.C, 1, 1}, nil }
func (g *GlobalAvgPool) Forward(c *Ctx, x Tensor) (Tensor, error) {
	if err := checkIn("avgpool", x, g.in); err != nil {
		return Tensor{}, err
	}
	y, err := g.y.out(c, x.N, Shape{g.in.C, 1, 1})
	if err != nil {
		return Tensor{}, err
	}
	hw := g.in.H * g.in.W
	c.Dev.RowSum(y.Buf, x.Buf, x.N*g.in.C, hw, 1/float32(hw))
	c.half(y.Buf)
	g.n = x.N
	return y, c.Dev.Err()
}

func (g *GlobalAvgPool) Backward(c *Ctx, dy Tensor, needDx bool) (Tensor, error) {
	if dy.N != g.n || dy.Shape != (Shape{g.in.C, 1, 1}) {
		return Tensor{}, backErr("avgpool", dy, g.n)
	}
	if !needDx {
		return Tensor{}, nil
	}
	dx, err := g.dx.out(c, dy.N, g.in)
	if err != nil {
		return Tensor{}, err
	}
	hw := g.in.H * g.in.W
	c.Dev.RowBroadcast(dx.Buf, dy.Buf, dy.N*g.in.C, hw, 1/float32(hw))
	c.half(dx.Buf)
	return dx, c.Dev.Err()
}

// MaxPool2d takes the maximum over K×K windows with the given stride.
type MaxPool2d struct {
	K, Stride  int
	g          tensor.PoolGeom
	in, out    Shape
	n          int
	y, idx, dx scratch
}

func NewMaxPool2d(k, stride int) *MaxPool2d { return &MaxPool2d{K: k, Stride: stride} }
func (m *MaxPool2d) Params() []*Param       { return nil }

func (m *MaxPool2d) Init(in Shape) (Shape, error) {
	g, err := tensor.NewPoolGeom(in.C, in.H, in.W, m.K, m.Stride)
	if err != nil {
		return Shape{}, fmt.Errorf("nn: maxpool: %w", err)
	}
	m.g, m.in, m.out = g, in, Shape{in.C, g.OH, g.OW}
	return m.out, nil
}

func (m *MaxPool2d) Forward(c *Ctx, x Tensor) (Tensor, error) {
	if err := checkIn("maxpool", x, m.in); err != nil {
		return Tensor{}, err
	}
	y, err := m.y.out(c, x.N, m.out)
	if err != nil {
		return Tensor{}, err
	}
	idx, err := m.idx.get(c.Dev, tensor.I32, y.Len())
	if err != nil {
		return Tensor{}, err
	}
	c.Dev.MaxPool(y.Buf, idx, x.Buf, m.g, x.N)
	m.n = x.N
	return y, c.Dev.Err()
}

func (m *MaxPool2d) Backward(c *Ctx, dy Tensor, needDx bool) (Tensor, error) {
	if dy.N != m.n || dy.Shape != m.out {
		return Tensor{}, backErr("maxpool", dy, m.n)
	}
	if !needDx {
		return Tensor{}, nil
	}
	dx, err := m.dx.out(c, dy.N, m.in)
	if err != nil {
		return Tensor{}, err
	}
	c.Dev.MaxPoolBackward(dx.Buf, dy.Buf, m.idx.b.Slice(0, dy.Len()), m.g, dy.N)
	return dx, c.Dev.Err()
}
