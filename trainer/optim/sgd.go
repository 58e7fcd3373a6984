package optim

import (
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/loaderd/loaderd/trainer/nn"
	"github.com/loaderd/loaderd/trainer/tensor"
)

// ErrConfig reports invalid hyper-parameters or a mismatched state.
var ErrConfig = errors.New("optim: invalid configuration")

// SGDConfig holds torch.optim.SGD's hyper-parameters (the learning rate is
// given to each Step, from a Schedule).
type SGDConfig struct {
	Momentum, Dampening, WeightDecay float64
	Nesterov                         bool
}

func (c SGDConfig) validate() error {
	switch {
	case c.Momentum < 0 || c.WeightDecay < 0 || c.Dampening < 0 || c.Dampening > 1:
		return fmt.Errorf("optim: %+v: %w", c, ErrConfig)
	case c.Nesterov && (c.Momentum <= 0 || c.Dampening != 0):
		return fmt.Errorf("optim: Nesterov momentum requires a momentum and zero dampening: %w", ErrConfig)
	}
	return nil
}

// SGD updates a flat parameter buffer from its gradient buffer:
//
//	g ← g + wd·p
//	b ← g (first step) or μ·b + (1−dampening)·g
//	g ← g + μ·b (Nesterov) or b
//	p ← p − lr·g
type SGD struct {
	dev    tensor.Device
	w, g   tensor.Buffer
	buf    tensor.Buffer
	hasBuf bool // the momentum buffer holds a value (PyTorch: not None)
	cfg    SGDConfig
	steps  int
}

// NewSGD returns an optimizer for parameters w with gradients g on dev.
func NewSGD(dev tensor.Device, w, g tensor.Buffer, cfg SGDConfig) (*SGD, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if dev == nil || !w.Valid() || w.Len() != g.Len() {
		return nil, fmt.Errorf("optim: weights (%d) and gradients (%d) differ: %w", w.Len(), g.Len(), ErrConfig)
	}
	s := &SGD{dev: dev, w: w, g: g, cfg: cfg}
	if err := s.ensureBuf(); err != nil {
		return nil, err
	}
	return s, nil
}

// ForModel returns an optimizer over all of m's learnable parameters.
func ForModel(m *nn.Model, cfg SGDConfig) (*SGD, error) {
	return NewSGD(m.Device(), m.Weights(), m.Grads(), cfg)
}

func (s *SGD) ensureBuf() error {
	if s.cfg.Momentum == 0 || s.buf.Valid() {
		return nil
	}
	b, err := s.dev.Alloc(tensor.F32, s.w.Len())
	if err != nil {
		return fmt.Errorf("optim: momentum buffer: %w", err)
	}
	s.buf = b
	return nil
}

// Config returns the hyper-parameters.
func (s *SGD) Config() SGDConfig { return s.cfg }

// Steps returns how many updates have been applied.
func (s *SGD) Steps() int { return s.steps }

// SetMomentum changes μ between steps (OneCycle cycles it).
func (s *SGD) SetMomentum(m float64) error {
	c := s.cfg
	c.Momentum = m
	if err := c.validate(); err != nil {
		return err
	}
	s.cfg = c
	return s.ensureBuf()
}

// Step applies one update with learning rate lr (enqueued on the device).
func (s *SGD) Step(lr float64) error {
	if lr < 0 || math.IsNaN(lr) {
		return fmt.Errorf("optim: learning rate %g: %w", lr, ErrConfig)
	}
	c := s.cfg
	s.dev.SGD(s.w, s.g, s.buf, tensor.SGDArgs{LR: float32(lr), Momentum: float32(c.Momentum),
		Dampening: float32(c.Dampening), WeightDecay: float32(c.WeightDecay),
		Nesterov: c.Nesterov, First: !s.hasBuf})
	if c.Momentum != 0 {
		s.hasBuf = true
	}
	s.steps++
	return s.dev.Err()
}

// Save writes the step count and momentum buffer in nn's checkpoint format.
// The step count is stored bit-exactly as two uint32 halves.
func (s *SGD) Save(w io.Writer) error {
	st := nn.Array{Name: "sgd.steps", Shape: []int{3}, Data: []float32{
		math.Float32frombits(uint32(s.steps)), math.Float32frombits(uint32(uint64(s.steps) >> 32)), 0}}
	arrs := []nn.Array{st}
	if s.hasBuf {
		st.Data[2] = 1
		v := make([]float32, s.buf.Len())
		if err := s.dev.CopyOut(v, s.buf); err != nil {
			return fmt.Errorf("optim: save: %w", err)
		}
		arrs = append(arrs, nn.Array{Name: "sgd.momentum_buffer", Shape: []int{len(v)}, Data: v})
	}
	return nn.WriteArrays(w, arrs)
}

// Load restores what Save wrote; the buffer length must match.
func (s *SGD) Load(r io.Reader) error {
	arrs, err := nn.ReadArrays(r)
	if err != nil {
		return fmt.Errorf("optim: load: %w", err)
	}
	if len(arrs) == 0 || arrs[0].Name != "sgd.steps" || len(arrs[0].Data) != 3 {
		return fmt.Errorf("optim: load: not an SGD state: %w", ErrConfig)
	}
	d := arrs[0].Data
	steps := int(uint64(math.Float32bits(d[0])) | uint64(math.Float32bits(d[1]))<<32)
	has := d[2] == 1
	if has {
		if len(arrs) != 2 || len(arrs[1].Data) != s.w.Len() {
			return fmt.Errorf("optim: load: momentum buffer does not match %d parameters: %w", s.w.Len(), ErrConfig)
		}
		if s.cfg.Momentum == 0 {
			return fmt.Errorf("optim: load: state has momentum, optimizer has none: %w", ErrConfig)
		}
		if err := s.dev.CopyIn(s.buf, arrs[1].Data); err != nil {
			return fmt.Errorf("optim: load: %w", err)
		}
	}
	s.steps, s.hasBuf = steps, has
	return s.dev.Sync()
}
