package parallel

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/loaderd/loaderd/trainer/nn"
	"github.com/loaderd/loaderd/trainer/optim"
	"github.com/loaderd/loaderd/trainer/tensor"
)

var ampIn = nn.Shape{C: 3, H: 16, W: 16}

func ampBuild() (nn.Module, error) {
	return nn.NewCNN(nn.CNNConfig{Widths: []int{8, 16}, Blocks: []int{1, 1}, Classes: 10})
}

func weightsOf(t *testing.T, m *nn.Model) []float32 {
	t.Helper()
	w := make([]float32, m.Weights().Len())
	if err := m.Device().CopyOut(w, m.Weights()); err != nil {
		t.Fatal(err)
	}
	return w
}

// Mixed precision learns the toy set as f32 does, on weights that differ
// from f32's (so the rounding is really applied), and fp16 ends with a
// finite loss scale; DataParallel on two devices (under the race
// detector, fp16 alone).
func TestMixedPrecisionLearns(t *testing.T) {
	var ref []float32
	precs := []tensor.Precision{tensor.F32Exact, tensor.BF16, tensor.FP16}
	if raceEnabled {
		precs = precs[2:]
	}
	for _, prec := range precs {
		t.Run(prec.String(), func(t *testing.T) {
			cfg := Config{In: ampIn, Seed: 3, Smoothing: 0.05, Precision: prec,
				SGD: optim.SGDConfig{Momentum: 0.9, Nesterov: true, WeightDecay: 5e-4}}
			dp, err := NewDataParallel(cpus(t, 2, 1), ampBuild, cfg)
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(8, 8))
			const steps, batch = 30, 32
			sched := optim.NewOneCycle(0.2, steps)
			skipped := 0
			for s := range steps {
				x, labels := colourData(r, batch, ampIn)
				st, err := dp.Step(x, labels, sched.LR(s))
				if err != nil {
					t.Fatal(err)
				}
				if st.Skipped {
					skipped++
				}
			}
			x, labels := colourData(r, 200, ampIn)
			ev, err := dp.Evaluate(x, labels)
			if err != nil {
				t.Fatal(err)
			}
			acc := float64(ev.Correct) / float64(ev.N)
			w := weightsOf(t, dp.Model(0))
			t.Logf("%v: held-out accuracy %.3f, %d steps skipped, scaler %+v", prec, acc, skipped, dp.Scaler())
			if acc < 0.85 {
				t.Errorf("held-out accuracy %.3f, want ≥ 0.85", acc)
			}
			switch prec {
			case tensor.F32Exact:
				ref = w
				if dp.Scaler() != nil || skipped > 0 {
					t.Errorf("f32 has a scaler %v or skipped %d steps", dp.Scaler(), skipped)
				}
			default:
				if ref != nil && slices.Equal(w, ref) {
					t.Errorf("%v trained to exactly f32's weights: no rounding applied", prec)
				}
			}
			if prec == tensor.FP16 && (dp.Scaler() == nil || !(dp.Scaler().Scale >= 1) || skipped >= steps/2) {
				t.Errorf("fp16 scaler %+v after %d skipped steps", dp.Scaler(), skipped)
			}
		})
	}
}

// An overflow injected into one fp16 step (an input value beyond fp16's
// range, Inf once rounded) skips exactly that step: weights and momentum
// unchanged bit for bit, the scale halved, the growth count reset; the
// steps around it train, and clean steps grow the scale again.
func TestFP16OverflowSkipsStep(t *testing.T) {
	for _, mode := range []string{"dp", "ddp"} {
		t.Run(mode, func(t *testing.T) {
			cfg := Config{In: ampIn, Seed: 5, Precision: tensor.FP16, InitScale: 256, GrowthInterval: 3,
				SGD: optim.SGDConfig{Momentum: 0.9}}
			step, model, scale := ampStepper(t, mode, cfg)
			r := rand.New(rand.NewPCG(1, 2))
			for s := range 6 {
				x, labels := colourData(r, 16, ampIn)
				if s == 2 {
					x[7] = 1e6
				}
				before := weightsOf(t, model())
				st, err := step(x, labels)
				if err != nil {
					t.Fatal(err)
				}
				after := weightsOf(t, model())
				sc, tr := scale()
				t.Logf("step %d: skipped %v, scale %g, tracker %d", s, st.Skipped, sc, tr)
				if st.Skipped != (s == 2) {
					t.Fatalf("step %d: skipped %v", s, st.Skipped)
				}
				if changed := !slices.Equal(before, after); changed == st.Skipped {
					t.Fatalf("step %d (skipped %v): weights changed %v", s, st.Skipped, changed)
				}
				want := map[int][2]float64{0: {256, 1}, 1: {256, 2}, 2: {128, 0}, 3: {128, 1}, 4: {128, 2}, 5: {256, 0}}[s]
				if float64(sc) != want[0] || float64(tr) != want[1] {
					t.Fatalf("step %d: scale %g tracker %d, want %g %g", s, sc, tr, want[0], want[1])
				}
			}
		})
	}
}

// ampStepper returns a step function over mode's engine with two devices,
// replica 0's model and its scaler's state.
func ampStepper(t *testing.T, mode string, cfg Config) (func([]float32, []int32) (Stats, error), func() *nn.Model, func() (float32, int)) {
	devs := cpus(t, 2, 1)
	if mode == "dp" {
		dp, err := NewDataParallel(devs, ampBuild, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return func(x []float32, l []int32) (Stats, error) { return dp.Step(x, l, 0.05) },
			func() *nn.Model { return dp.Model(0) },
			func() (float32, int) { return dp.Scaler().Scale, dp.Scaler().Tracker() }
	}
	ranks, err := NewDDP(devs, ampBuild, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sz := cfg.In.Size()
	return func(x []float32, l []int32) (Stats, error) {
			n := len(l) / len(ranks)
			sts := make([]Stats, len(ranks))
			errs := make(chan error, len(ranks))
			for i, r := range ranks {
				go func() {
					var err error
					sts[i], err = r.Step(x[i*n*sz:(i+1)*n*sz], l[i*n:(i+1)*n], 0.05)
					errs <- err
				}()
			}
			for range ranks {
				if err := <-errs; err != nil {
					return Stats{}, err
				}
			}
			for i, s := range sts {
				if s.Skipped != sts[0].Skipped || ranks[i].Scaler().Scale != ranks[0].Scaler().Scale {
					t.Fatalf("rank %d disagrees: %+v vs %+v", i, s, sts[0])
				}
			}
			return sts[0], nil
		}, func() *nn.Model { return ranks[0].Model() },
		func() (float32, int) { return ranks[0].Scaler().Scale, ranks[0].Scaler().Tracker() }
}
