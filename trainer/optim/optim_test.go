package optim

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/loaderd/loaderd/trainer/tensor"
)

func newCPU(t *testing.T) *tensor.CPU {
	d, err := tensor.NewCPU("optim", 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func alloc(t *testing.T, d tensor.Device, v []float32) tensor.Buffer {
	b, err := d.Alloc(tensor.F32, len(v))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.CopyIn(b, v); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSGDHandComputed checks a scalar parameter p = 1 with gradients 0.5
// then −0.3, lr 0.1, weight decay 0.01, momentum 0.9, against values worked
// out by hand from torch.optim.SGD's documented algorithm.
func TestSGDHandComputed(t *testing.T) {
	cases := []struct {
		name string
		cfg  SGDConfig
		want [2]float64
	}{
		// d=0.5+0.01=0.51, b=0.51, p=0.949; d=−0.3+0.00949=−0.29051,
		// b=0.459−0.29051=0.16849, p=0.949−0.016849
		{"momentum", SGDConfig{Momentum: 0.9, WeightDecay: 0.01}, [2]float64{0.949, 0.932151}},
		// first: d=0.51+0.9·0.51=0.969, p=0.9031; then d=−0.290969,
		// b=0.168031, d=−0.290969+0.1512279=−0.1397411
		{"nesterov", SGDConfig{Momentum: 0.9, WeightDecay: 0.01, Nesterov: true}, [2]float64{0.9031, 0.91707411}},
		// the first step ignores dampening; then b=0.459+0.9·(−0.29051)
		{"dampening", SGDConfig{Momentum: 0.9, Dampening: 0.1, WeightDecay: 0.01}, [2]float64{0.949, 0.9292459}},
		// plain: p=1−0.1·0.51; then p=0.949−0.1·(−0.29051)
		{"plain", SGDConfig{WeightDecay: 0.01}, [2]float64{0.949, 0.978051}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newCPU(t)
			w, g := alloc(t, d, []float32{1}), alloc(t, d, []float32{0.5})
			s, err := NewSGD(d, w, g, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			for i, grad := range []float32{0.5, -0.3} {
				if err := d.CopyIn(g, []float32{grad}); err != nil {
					t.Fatal(err)
				}
				if err := s.Step(0.1); err != nil {
					t.Fatal(err)
				}
				v := make([]float32, 1)
				if err := d.CopyOut(v, w); err != nil {
					t.Fatal(err)
				}
				if math.Abs(float64(v[0])-tc.want[i]) > 2e-7 {
					t.Errorf("step %d: p = %.8f, want %.8f", i+1, v[0], tc.want[i])
				}
			}
		})
	}
}

// TestSGDMatchesReference runs 20 steps on a vector against a float64
// transcription of torch.optim.SGD.step.
func TestSGDMatchesReference(t *testing.T) {
	for _, cfg := range []SGDConfig{
		{Momentum: 0.9, Nesterov: true, WeightDecay: 5e-4},
		{Momentum: 0.5, Dampening: 0.5},
	} {
		d := newCPU(t)
		const n = 5
		p64, buf := []float64{1, -2, 0.5, 3, -0.25}, make([]float64, n)
		w, g := alloc(t, d, to32(p64)), alloc(t, d, make([]float32, n))
		s, err := NewSGD(d, w, g, cfg)
		if err != nil {
			t.Fatal(err)
		}
		for step := 0; step < 20; step++ {
			grad := make([]float64, n)
			for i := range grad {
				grad[i] = math.Sin(float64(step*n+i)) + 0.1*p64[i]
			}
			lr := 0.05 * (1 + math.Cos(float64(step)))
			for i := range p64 {
				dp := float64(float32(grad[i])) + cfg.WeightDecay*p64[i]
				if step == 0 {
					buf[i] = dp
				} else {
					buf[i] = cfg.Momentum*buf[i] + (1-cfg.Dampening)*dp
				}
				if cfg.Nesterov {
					dp += cfg.Momentum * buf[i]
				} else {
					dp = buf[i]
				}
				p64[i] -= lr * dp
			}
			if err := d.CopyIn(g, to32(grad)); err != nil {
				t.Fatal(err)
			}
			if err := s.Step(lr); err != nil {
				t.Fatal(err)
			}
		}
		got := make([]float32, n)
		if err := d.CopyOut(got, w); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if math.Abs(float64(got[i])-p64[i]) > 1e-5*(1+math.Abs(p64[i])) {
				t.Errorf("%+v: p[%d] = %g, want %g", cfg, i, got[i], p64[i])
			}
		}
		if s.Steps() != 20 {
			t.Errorf("Steps() = %d", s.Steps())
		}
	}
}

func to32(v []float64) []float32 {
	o := make([]float32, len(v))
	for i, x := range v {
		o[i] = float32(x)
	}
	return o
}

func TestSGDConfigErrors(t *testing.T) {
	d := newCPU(t)
	w := alloc(t, d, []float32{1, 2})
	for _, cfg := range []SGDConfig{
		{Nesterov: true},
		{Momentum: 0.9, Dampening: 0.1, Nesterov: true},
		{Momentum: -1},
		{WeightDecay: -1},
	} {
		if _, err := NewSGD(d, w, w, cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: err = %v", cfg, err)
		}
	}
	s, err := NewSGD(d, w, alloc(t, d, []float32{0, 0}), SGDConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Step(-1); !errors.Is(err, ErrConfig) {
		t.Errorf("negative lr: err = %v", err)
	}
}

func TestSGDSaveLoad(t *testing.T) {
	d := newCPU(t)
	cfg := SGDConfig{Momentum: 0.9}
	w, g := alloc(t, d, []float32{1, 2}), alloc(t, d, []float32{0.5, -1})
	a, _ := NewSGD(d, w, g, cfg)
	for range 3 {
		a.Step(0.1)
	}
	var buf bytes.Buffer
	if err := a.Save(&buf); err != nil {
		t.Fatal(err)
	}
	// b continues exactly as a does.
	w2 := alloc(t, d, make([]float32, 2))
	d.Copy(w2, w)
	b, _ := NewSGD(d, w2, g, cfg)
	if err := b.Load(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	a.Step(0.1)
	b.Step(0.1)
	va, vb := make([]float32, 2), make([]float32, 2)
	d.CopyOut(va, w)
	d.CopyOut(vb, w2)
	if va != nil && (va[0] != vb[0] || va[1] != vb[1]) || b.Steps() != 4 {
		t.Errorf("after load: %v vs %v, steps %d", va, vb, b.Steps())
	}
	c, _ := NewSGD(d, alloc(t, d, []float32{1, 2, 3}), alloc(t, d, []float32{1, 2, 3}), cfg)
	if err := c.Load(bytes.NewReader(buf.Bytes())); !errors.Is(err, ErrConfig) {
		t.Errorf("size mismatch: err = %v", err)
	}
}

func TestSchedules(t *testing.T) {
	oc := NewOneCycle(1, 100) // initial 0.04, min 4e-6, peak at step 29
	wc := WarmupCosine{Base: 0.1, Final: 0.001, Warmup: 5, Total: 105}
	three := NewOneCycle(1, 100)
	three.ThreePhase = true // up to step 29, down to 0.04 at 58, then to 4e-6
	cases := []struct {
		name string
		got  float64
		want float64
	}{
		{"onecycle lr 0", oc.LR(0), 0.04},
		{"onecycle lr 29 (peak)", oc.LR(29), 1},
		{"onecycle lr 64 (mid-descent)", oc.LR(64), (1 + 4e-6) / 2},
		{"onecycle lr 99 (end)", oc.LR(99), 4e-6},
		{"onecycle lr 150 (clamped)", oc.LR(150), 4e-6},
		{"onecycle lr 15", oc.LR(15), 1 + (0.04-1)/2*(math.Cos(math.Pi*15/29)+1)},
		{"onecycle momentum 0", oc.Momentum(0), 0.95},
		{"onecycle momentum 29", oc.Momentum(29), 0.85},
		{"onecycle momentum 99", oc.Momentum(99), 0.95},
		{"three-phase lr 58", three.LR(58), 0.04},
		{"three-phase lr 99", three.LR(99), 4e-6},
		{"warmup 0", wc.LR(0), 0.02},
		{"warmup 4", wc.LR(4), 0.1},
		{"cosine start", wc.LR(5), 0.1},
		{"cosine middle", wc.LR(55), 0.0505},
		{"cosine end", wc.LR(105), 0.001},
		{"cosine after end", wc.LR(500), 0.001},
		{"constant", Constant(0.3).LR(7), 0.3},
	}
	for _, tc := range cases {
		if math.Abs(tc.got-tc.want) > 1e-12 {
			t.Errorf("%s: %.12g, want %.12g", tc.name, tc.got, tc.want)
		}
	}
}
