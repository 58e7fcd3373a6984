package parallel

import (
	"fmt"

	"github.com/loaderd/loaderd/trainer/amp"
	"github.com/loaderd/loaderd/trainer/tensor"
)

// mixed is one replica's mixed-precision state: the f32 master weights
// stashed while the model's own weight buffer holds their rounded working
// copy, and a one-element flag for the Inf/NaN check.
type mixed struct {
	prec   tensor.Precision
	master tensor.Buffer
	flag   tensor.Buffer
	host   [1]float32
}

func newMixed(dev tensor.Device, n int, prec tensor.Precision) (*mixed, error) {
	if prec == tensor.F32Exact {
		return nil, nil
	}
	if prec > tensor.FP16 {
		return nil, fmt.Errorf("parallel: precision %v: %w", prec, ErrConfig)
	}
	m := &mixed{prec: prec}
	var err error
	if m.master, err = dev.Alloc(tensor.F32, n); err == nil {
		m.flag, err = dev.Alloc(tensor.F32, 1)
	}
	if err != nil {
		return nil, fmt.Errorf("parallel: mixed precision: %w", err)
	}
	return m, nil
}

// enter stashes the master weights w and rounds w in place: forward and
// backward then see the half-precision working copy.
func (m *mixed) enter(dev tensor.Device, w tensor.Buffer) {
	dev.Copy(m.master, w)
	dev.Round(w, m.prec)
}

// leave rounds the weight gradients (a half-precision parameter's gradient
// is half) and restores the master weights for the optimizer.
func (m *mixed) leave(dev tensor.Device, w, g tensor.Buffer) {
	dev.Round(g, m.prec)
	dev.Copy(w, m.master)
}

// unscale multiplies g by the scaler's reciprocal scale and reports whether
// any gradient is Inf or NaN (torch's _amp_foreach_non_finite_check_and_unscale_).
func (m *mixed) unscale(dev tensor.Device, g tensor.Buffer, s *amp.GradScaler) (bool, error) {
	dev.Scale(g, s.InvScale())
	dev.NonFinite(m.flag, g)
	if err := dev.CopyOut(m.host[:], m.flag); err != nil {
		return false, fmt.Errorf("parallel: gradient check: %w", err)
	}
	return m.host[0] != 0, nil
}

// newScaler returns cfg's GradScaler for fp16, nil otherwise.
func newScaler(cfg Config) *amp.GradScaler {
	if cfg.Precision != tensor.FP16 {
		return nil
	}
	s := amp.NewGradScaler()
	if cfg.InitScale > 0 {
		s.Scale = cfg.InitScale
	}
	if cfg.GrowthInterval > 0 {
		s.GrowthInterval = cfg.GrowthInterval
	}
	return s
}

// lossScale is the factor the loss gradient is multiplied by.
func lossScale(s *amp.GradScaler) float32 {
	if s == nil {
		return 1
	}
	return s.Scale
}
