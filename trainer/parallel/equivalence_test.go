package parallel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/loaderd/loaderd/trainer/nn"
	"github.com/loaderd/loaderd/trainer/optim"
)

var small = nn.Shape{C: 3, H: 8, W: 8}

func buildMLP() (nn.Module, error) { return nn.NewMLP(small, []int{16}, 10), nil }

func buildCNN() (nn.Module, error) {
	m, err := nn.NewCNN(nn.CNNConfig{Widths: []int{4, 8, 16}, Blocks: []int{1, 1, 1}, Classes: 10})
	return m, err
}

func testConfig() Config {
	return Config{In: small, Seed: 42, Smoothing: 0.1,
		SGD: optim.SGDConfig{Momentum: 0.9, Nesterov: true, WeightDecay: 5e-4}}
}

type batch struct {
	x      []float32
	labels []int32
}

func batches(steps, n int) []batch {
	r := rand.New(rand.NewPCG(5, 5))
	bs := make([]batch, steps)
	for s := range bs {
		bs[s].x = make([]float32, n*small.Size())
		for i := range bs[s].x {
			bs[s].x[i] = float32(r.NormFloat64())
		}
		bs[s].labels = make([]int32, n)
		for i := range bs[s].labels {
			bs[s].labels[i] = int32(r.IntN(10))
		}
	}
	return bs
}

func lrAt(step int) float64 { return 0.2 / float64(step+1) }

// reference trains on one device with nn and optim directly.
func reference(t *testing.T, build Builder, cfg Config, bs []batch) (w, s []float32) {
	t.Helper()
	dev := cpus(t, 1, 2)[0]
	root, _ := build()
	m, err := nn.NewModel(dev, root, cfg.In, cfg.Seed)
	if err != nil {
		t.Fatal(err)
	}
	opt, err := optim.ForModel(m, cfg.SGD)
	if err != nil {
		t.Fatal(err)
	}
	loss := nn.NewSoftmaxCrossEntropy(cfg.Smoothing)
	for step, b := range bs {
		n := len(b.labels)
		x, _ := m.Input(n)
		lab, _ := m.Labels(n)
		dev.CopyIn(x.Buf, b.x)
		dev.CopyInInt32(lab, b.labels)
		y, err := m.Forward(x)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := loss.Forward(m.Ctx(), y, lab); err != nil {
			t.Fatal(err)
		}
		dl, err := loss.Backward(m.Ctx(), 1/float32(n))
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Backward(dl); err != nil {
			t.Fatal(err)
		}
		if err := opt.Step(lrAt(step)); err != nil {
			t.Fatal(err)
		}
	}
	return download(t, dev, m.Weights()), download(t, dev, m.StateBuf())
}

// maxRelDiff returns max |a−b| / (1 + |b|).
func maxRelDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i])-float64(b[i]))/(1+math.Abs(float64(b[i]))))
	}
	return d
}

// equivTol bounds float rounding after 5 steps: reductions run in another
// order on K devices. A real divergence (wrong scaling, missing SyncBN) is
// orders of magnitude larger; TestEquivalenceDiscriminates checks that.
const equivTol = 2e-5

func TestDataParallelEquivalence(t *testing.T) {
	for _, tc := range []struct {
		name   string
		build  Builder
		syncBN bool
		n      int
	}{
		{"mlp", buildMLP, false, 12},
		{"mlp/ragged", buildMLP, false, 10},
		{"cnn/syncbn", buildCNN, true, 12},
		{"cnn/syncbn/ragged", buildCNN, true, 10},
	} {
		cfg := testConfig()
		cfg.SyncBN = tc.syncBN
		bs := batches(5, tc.n)
		wantW, wantS := reference(t, tc.build, cfg, bs)
		for _, k := range []int{1, 2, 4} {
			t.Run(fmt.Sprintf("%s/K=%d", tc.name, k), func(t *testing.T) {
				dp, err := NewDataParallel(cpus(t, k, 1), tc.build, cfg)
				if err != nil {
					t.Fatal(err)
				}
				w0 := download(t, dp.Model(0).Device(), dp.Model(0).Weights())
				for step, b := range bs {
					if _, err := dp.Step(b.x, b.labels, lrAt(step)); err != nil {
						t.Fatal(err)
					}
				}
				w := download(t, dp.Model(0).Device(), dp.Model(0).Weights())
				if maxRelDiff(w, w0) < 1e-3 {
					t.Fatal("training did not move the weights")
				}
				if d := maxRelDiff(w, wantW); d > equivTol {
					t.Errorf("weights differ from one device by %.3g", d)
				}
				s := download(t, dp.Model(0).Device(), dp.Model(0).StateBuf())
				if d := maxRelDiff(s, wantS); d > equivTol {
					t.Errorf("running stats differ from one device by %.3g", d)
				}
				for i := 1; i < k; i++ { // replicas are bit-identical
					m := dp.Model(i)
					if maxRelDiff(download(t, m.Device(), m.Weights()), w) != 0 ||
						maxRelDiff(download(t, m.Device(), m.StateBuf()), s) != 0 {
						t.Errorf("replica %d differs from replica 0", i)
					}
				}
			})
		}
	}
}

func TestDDPEquivalence(t *testing.T) {
	for _, tc := range []struct {
		name   string
		build  Builder
		syncBN bool
	}{
		{"mlp", buildMLP, false},
		{"cnn/syncbn", buildCNN, true},
	} {
		cfg := testConfig()
		cfg.SyncBN = tc.syncBN
		const n = 12
		bs := batches(5, n)
		wantW, wantS := reference(t, tc.build, cfg, bs)
		for _, k := range []int{1, 2, 4} {
			t.Run(fmt.Sprintf("%s/K=%d", tc.name, k), func(t *testing.T) {
				ranks, err := NewDDP(cpus(t, k, 1), tc.build, cfg)
				if err != nil {
					t.Fatal(err)
				}
				sz := small.Size()
				for step, b := range bs {
					stats := make([]Stats, k)
					errs := onAll(k, func(r int) error { // rank r gets slice r
						lo, hi := n*r/k, n*(r+1)/k
						var err error
						stats[r], err = ranks[r].Step(b.x[lo*sz:hi*sz], b.labels[lo:hi], lrAt(step))
						return err
					})
					for r, err := range errs {
						if err != nil {
							t.Fatalf("rank %d: %v", r, err)
						}
						if stats[r] != stats[0] || stats[r].N != n {
							t.Fatalf("rank %d stats %+v, rank 0 %+v", r, stats[r], stats[0])
						}
					}
				}
				for r, rk := range ranks {
					m := rk.Model()
					w, s := download(t, m.Device(), m.Weights()), download(t, m.Device(), m.StateBuf())
					if d := maxRelDiff(w, wantW); d > equivTol {
						t.Errorf("rank %d weights differ from one device by %.3g", r, d)
					}
					if d := maxRelDiff(s, wantS); d > equivTol {
						t.Errorf("rank %d running stats differ from one device by %.3g", r, d)
					}
				}
			})
		}
	}
}

// TestEquivalenceDiscriminates shows the tolerance has teeth: per-replica
// BatchNorm statistics (no SyncBN) on K=4 devices are a different
// computation, and the comparison sees it.
func TestEquivalenceDiscriminates(t *testing.T) {
	cfg := testConfig()
	bs := batches(5, 12)
	cfg.SyncBN = true
	wantW, _ := reference(t, buildCNN, cfg, bs)
	cfg.SyncBN = false
	dp, err := NewDataParallel(cpus(t, 4, 1), buildCNN, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for step, b := range bs {
		if _, err := dp.Step(b.x, b.labels, lrAt(step)); err != nil {
			t.Fatal(err)
		}
	}
	w := download(t, dp.Model(0).Device(), dp.Model(0).Weights())
	if d := maxRelDiff(w, wantW); d < 100*equivTol {
		t.Errorf("per-replica BN differs from global BN by only %.3g", d)
	}
}
