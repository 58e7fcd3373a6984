package nn

import (
	"fmt"

	"github.com/loaderd/loaderd/trainer/tensor"
)

// Model binds a module tree to a device: it checks shapes, lays out every
// parameter in flat buffers and initialises them from a seed.
type Model struct {
	root          Module
	in, out       Shape
	params, state []*Param
	w, g, s       tensor.Buffer
	nw, ns        int
	ctx           Ctx
	input, labels scratch
}

// NewModel initialises root for per-sample input shape in on dev. The same
// (root structure, seed) gives bit-identical parameters on every device.
func NewModel(dev tensor.Device, root Module, in Shape, seed uint64) (*Model, error) {
	if dev == nil || root == nil {
		return nil, fmt.Errorf("nn: NewModel: nil device or module: %w", tensor.ErrArg)
	}
	out, err := root.Init(in)
	if err != nil {
		return nil, err
	}
	m := &Model{root: root, in: in, out: out, ctx: Ctx{Dev: dev, Train: true}}
	for _, p := range root.Params() {
		if p.Len() <= 0 {
			return nil, fmt.Errorf("nn: parameter %s has shape %v: %w", p.Name, p.Shape, ErrShape)
		}
		if p.State {
			m.state = append(m.state, p)
			m.ns += p.Len()
		} else {
			m.params = append(m.params, p)
			m.nw += p.Len()
		}
	}
	if m.w, err = allocInit(dev, m.params, m.nw, seed, 0); err != nil {
		return nil, err
	}
	if m.g, err = dev.Alloc(tensor.F32, max(1, m.nw)); err != nil {
		return nil, fmt.Errorf("nn: %w", err)
	}
	if m.s, err = allocInit(dev, m.state, m.ns, seed, len(m.params)); err != nil {
		return nil, err
	}
	off := 0
	for _, p := range m.params {
		p.W, p.G = m.w.Slice(off, p.Len()), m.g.Slice(off, p.Len())
		off += p.Len()
	}
	off = 0
	for _, p := range m.state {
		p.W, p.G = m.s.Slice(off, p.Len()), tensor.Buffer{}
		off += p.Len()
	}
	return m, dev.Sync()
}

func allocInit(dev tensor.Device, ps []*Param, n int, seed uint64, index0 int) (tensor.Buffer, error) {
	b, err := dev.Alloc(tensor.F32, max(1, n))
	if err != nil {
		return b, fmt.Errorf("nn: %w", err)
	}
	host := make([]float32, b.Len())
	off := 0
	for i, p := range ps {
		p.initValues(host[off:off+p.Len()], seed, index0+i)
		off += p.Len()
	}
	if err := dev.CopyIn(b, host); err != nil {
		return b, fmt.Errorf("nn: %w", err)
	}
	return b, dev.Sync()
}

func (m *Model) Device() tensor.Device { return m.ctx.Dev }
func (m *Model) Root() Module          { return m.root }
func (m *Model) In() Shape             { return m.in }
func (m *Model) Out() Shape            { return m.out }

// Ctx returns the model's context (for the loss, which is not a Module).
func (m *Model) Ctx() *Ctx { return &m.ctx }

// Params returns the learnable parameters in layout order.
func (m *Model) Params() []*Param { return m.params }

// State returns the running statistics in layout order.
func (m *Model) State() []*Param { return m.state }

// NumParams returns the number of learnable scalars.
func (m *Model) NumParams() int { return m.nw }

// Weights, Grads and StateBuf are the flat buffers (Weights and Grads are
// parallel). A model without running statistics has a one-element StateBuf.
func (m *Model) Weights() tensor.Buffer  { return m.w.Slice(0, max(1, m.nw)) }
func (m *Model) Grads() tensor.Buffer    { return m.g.Slice(0, max(1, m.nw)) }
func (m *Model) StateBuf() tensor.Buffer { return m.s }

// SetTrain switches between training (batch statistics) and evaluation.
func (m *Model) SetTrain(on bool) { m.ctx.Train = on }
func (m *Model) Training() bool   { return m.ctx.Train }

// Input returns a device tensor for n input samples, owned by the model and
// reused across calls; CopyIn the batch into its Buf.
func (m *Model) Input(n int) (Tensor, error) { return m.input.out(&m.ctx, n, m.in) }

// Labels returns an I32 device buffer for n labels, reused across calls.
func (m *Model) Labels(n int) (tensor.Buffer, error) { return m.labels.get(m.ctx.Dev, tensor.I32, n) }

// Forward runs the model on x (N×In) and returns the N×Out logits.
func (m *Model) Forward(x Tensor) (Tensor, error) {
	if err := checkIn("model", x, m.in); err != nil {
		return Tensor{}, err
	}
	y, err := m.root.Forward(&m.ctx, x)
	if err != nil {
		return Tensor{}, err
	}
	return y, m.ctx.Dev.Err()
}

// Backward back-propagates dy (gradient of the logits), overwriting Grads.
func (m *Model) Backward(dy Tensor) error {
	if _, err := m.root.Backward(&m.ctx, dy, false); err != nil {
		return err
	}
	return m.ctx.Dev.Err()
}
