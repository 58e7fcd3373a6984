package amp

import (
	"errors"
	"fmt"
	"math"

	"github.com/loaderd/loaderd/client/sample"
)

// Mode is a mixed-precision mode: the type of the low-precision copies.
type Mode uint8

const (
	Off  Mode = iota // float32 throughout
	BF16             // bfloat16 copies; no loss scaling needed (f32's range)
	FP16             // float16 copies; gradients need a GradScaler
)

// ErrMode reports an unknown mode name.
var ErrMode = errors.New("amp: unknown mode")

// ParseMode reads "", "off", "bf16" or "fp16".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "", "off", "none":
		return Off, nil
	case "bf16", "bfloat16":
		return BF16, nil
	case "fp16", "f16", "float16", "half":
		return FP16, nil
	}
	return Off, fmt.Errorf("%w %q: want bf16, fp16 or off", ErrMode, s)
}

func (m Mode) String() string { return [...]string{"off", "bf16", "fp16"}[m] }

// GradScaler is torch.amp.GradScaler's state machine: the loss is
// multiplied by Scale before backward, gradients are unscaled (multiplied
// by the float32 reciprocal) before the optimizer, a step whose gradients
// hold an Inf or NaN is skipped, and Update then halves the scale (backoff)
// on such a step, or doubles it (growth) after GrowthInterval clean steps
// in a row — never to Inf.
type GradScaler struct {
	Scale          float32
	GrowthFactor   float32
	BackoffFactor  float32
	GrowthInterval int
	tracker        int // clean steps since the last growth or backoff
}

// NewGradScaler returns PyTorch's defaults: init_scale 2¹⁶, growth_factor
// 2, backoff_factor 0.5, growth_interval 2000.
func NewGradScaler() *GradScaler {
	return &GradScaler{Scale: 1 << 16, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 2000}
}

// Tracker returns the clean steps counted towards the next growth.
func (s *GradScaler) Tracker() int { return s.tracker }

// SetTracker restores the count Tracker returned (from a checkpoint).
func (s *GradScaler) SetTracker(n int) { s.tracker = n }

// InvScale is the unscaling factor: 1/Scale computed in float64 and
// rounded to float32, as PyTorch computes it.
func (s *GradScaler) InvScale() float32 { return float32(1 / float64(s.Scale)) }

// Unscale multiplies grads by 1/Scale in place (the reciprocal computed in
// float64 and rounded to float32, as PyTorch does) and reports whether any
// gradient is Inf or NaN, in which case the caller skips the optimizer
// step. Call Update after every step, skipped or not.
func (s *GradScaler) Unscale(grads []float32) (foundInf bool) {
	inv := s.InvScale()
	for i, g := range grads {
		g *= inv
		grads[i] = g
		if math.IsInf(float64(g), 0) || g != g {
			foundInf = true
		}
	}
	return foundInf
}

// Update moves the scale after a step: PyTorch's _amp_update_scale_.
func (s *GradScaler) Update(foundInf bool) {
	if foundInf {
		s.Scale *= s.BackoffFactor
		s.tracker = 0
		return
	}
	s.tracker++
	if s.tracker == s.GrowthInterval {
		if next := s.Scale * s.GrowthFactor; !math.IsInf(float64(next), 0) {
			s.Scale = next
		}
		s.tracker = 0
	}
}

// Round rounds every value of x to mode's type and back, in place, ties
// to even (NaN stays NaN; float16 overflows to ±Inf at 65520).
func Round(x []float32, mode Mode) {
	switch mode {
	case BF16:
		for i, v := range x {
			x[i] = math.Float32frombits(uint32(sample.BFloat16(v)) << 16)
		}
	case FP16:
		for i, v := range x {
			x[i] = Float16To32(sample.Float16(v))
		}
	}
}

// Float16To32 returns the float32 value of IEEE binary16 bits h (exact).
func Float16To32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // Inf, NaN
		return math.Float32frombits(sign | 0xff<<23 | man<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
	case man == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal: man · 2⁻²⁴.
	v := float32(man) * (1.0 / (1 << 24))
	if sign != 0 {
		v = -v
	}
	return v
}
