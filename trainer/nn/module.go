package nn

import "fmt"

// Module is a layer or a composition of layers.
//
// Init is called once, by NewModel, with the per-sample input shape and
// returns the output shape. Forward returns an output owned by the module,
// valid until its next Forward. Backward takes the gradient of the output,
// sets the gradients of the module's parameters (overwriting them) and, if
// needDx, returns the gradient of the input (owned by the module).
type Module interface {
	Init(in Shape) (Shape, error)
	Params() []*Param
	Forward(c *Ctx, x Tensor) (Tensor, error)
	Backward(c *Ctx, dy Tensor, needDx bool) (Tensor, error)
}

// Container is a Module made of other modules.
type Container interface {
	Module
	Children() []Module
}

// Walk calls fn for m and, depth first, every module inside it.
func Walk(m Module, fn func(Module)) {
	fn(m)
	if c, ok := m.(Container); ok {
		for _, ch := range c.Children() {
			Walk(ch, fn)
		}
	}
}

func prefix(pre string, m Module) {
	for _, p := range m.Params() {
		p.Name = pre + p.Name
	}
}

// Sequential runs modules in order. Parameter names get "i." prefixes.
type Sequential struct{ Mods []Module }

// NewSequential composes mods.
func NewSequential(mods ...Module) *Sequential {
	for i, m := range mods {
		prefix(fmt.Sprintf("%d.", i), m)
	}
	return &Sequential{Mods: mods}
}

func (s *Sequential) Children() []Module { return s.Mods }

func (s *Sequential) Params() []*Param {
	var ps []*Param
	for _, m := range s.Mods {
		ps = append(ps, m.Params()...)
	}
	return ps
}

func (s *Sequential) Init(in Shape) (Shape, error) {
	for i, m := range s.Mods {
		out, err := m.Init(in)
		if err != nil {
			return Shape{}, fmt.Errorf("nn: sequential[%d]: %w", i, err)
		}
		in = out
	}
	return in, nil
}

func (s *Sequential) Forward(c *Ctx, x Tensor) (Tensor, error) {
	var err error
	for _, m := range s.Mods {
		if x, err = m.Forward(c, x); err != nil {
			return Tensor{}, err
		}
	}
	return x, nil
}

func (s *Sequential) Backward(c *Ctx, dy Tensor, needDx bool) (Tensor, error) {
	var err error
	for i := len(s.Mods) - 1; i >= 0; i-- {
		if dy, err = s.Mods[i].Backward(c, dy, needDx || i > 0); err != nil {
			return Tensor{}, err
		}
	}
	return dy, nil
}

// Residual computes ReLU(Main(x) + Shortcut(x)); a nil Shortcut is the
// identity. Parameter names get "main." and "shortcut." prefixes.
type Residual struct {
	Main, Shortcut Module
	in, out        Shape
	y, ds, dx      scratch
	yt             Tensor
}

// NewResidual builds a residual block.
func NewResidual(main, shortcut Module) *Residual {
	prefix("main.", main)
	if shortcut != nil {
		prefix("shortcut.", shortcut)
	}
	return &Residual{Main: main, Shortcut: shortcut}
}

func (r *Residual) Children() []Module {
	if r.Shortcut == nil {
		return []Module{r.Main}
	}
	return []Module{r.Main, r.Shortcut}
}

func (r *Residual) Params() []*Param {
	ps := r.Main.Params()
	if r.Shortcut != nil {
		ps = append(ps, r.Shortcut.Params()...)
	}
	return ps
}

func (r *Residual) Init(in Shape) (Shape, error) {
	out, err := r.Main.Init(in)
	if err != nil {
		return Shape{}, fmt.Errorf("nn: residual main: %w", err)
	}
	sc := in
	if r.Shortcut != nil {
		if sc, err = r.Shortcut.Init(in); err != nil {
			return Shape{}, fmt.Errorf("nn: residual shortcut: %w", err)
		}
	}
	if sc != out {
		return Shape{}, shapeErr("residual", "main gives %v, shortcut %v", out, sc)
	}
	r.in, r.out = in, out
	return out, nil
}

func (r *Residual) Forward(c *Ctx, x Tensor) (Tensor, error) {
	if err := checkIn("residual", x, r.in); err != nil {
		return Tensor{}, err
	}
	a, err := r.Main.Forward(c, x)
	if err != nil {
		return Tensor{}, err
	}
	s := x
	if r.Shortcut != nil {
		if s, err = r.Shortcut.Forward(c, x); err != nil {
			return Tensor{}, err
		}
	}
	y, err := r.y.out(c, x.N, r.out)
	if err != nil {
		return Tensor{}, err
	}
	c.Dev.Add(y.Buf, a.Buf, s.Buf)
	c.Dev.ReLU(y.Buf, y.Buf)
	r.yt = y
	return y, c.Dev.Err()
}

func (r *Residual) Backward(c *Ctx, dy Tensor, needDx bool) (Tensor, error) {
	if r.yt.N != dy.N || dy.Shape != r.out {
		return Tensor{}, fmt.Errorf("nn: residual backward of %d×%v after forward of %d: %w", dy.N, dy.Shape, r.yt.N, ErrState)
	}
	ds, err := r.ds.out(c, dy.N, r.out)
	if err != nil {
		return Tensor{}, err
	}
	c.Dev.ReLUBackward(ds.Buf, dy.Buf, r.yt.Buf)
	da, err := r.Main.Backward(c, ds, needDx)
	if err != nil {
		return Tensor{}, err
	}
	dsc := ds
	if r.Shortcut != nil {
		if dsc, err = r.Shortcut.Backward(c, ds, needDx); err != nil {
			return Tensor{}, err
		}
	}
	if !needDx {
		return Tensor{}, c.Dev.Err()
	}
	dx, err := r.dx.out(c, dy.N, r.in)
	if err != nil {
		return Tensor{}, err
	}
	c.Dev.Add(dx.Buf, da.Buf, dsc.Buf)
	return dx, c.Dev.Err()
}
