package parallel

import (
	"math/rand/v2"
	"testing"

	"github.com/loaderd/loaderd/trainer/nn"
	"github.com/loaderd/loaderd/trainer/optim"
)

// colourData makes a learnable toy set: each class has its own mean colour
// (fixed, from a seeded generator); pixels add strong noise, so the net has
// to pool over the image to tell classes apart.
func colourData(r *rand.Rand, n int, in nn.Shape) ([]float32, []int32) {
	cr := rand.New(rand.NewPCG(99, 99))
	var colour [10][3]float32
	for c := range colour {
		for ch := range colour[c] {
			colour[c][ch] = float32(cr.NormFloat64())
		}
	}
	x := make([]float32, n*in.Size())
	labels := make([]int32, n)
	for i := range labels {
		c := r.IntN(10)
		labels[i] = int32(c)
		img := x[i*in.Size() : (i+1)*in.Size()]
		for j := range img {
			img[j] = colour[c][j/(in.H*in.W)] + float32(r.NormFloat64())
		}
	}
	return x, labels
}

// TestTrainingLearns trains a small CNN with DataParallel on two devices
// and checks that the loss falls and held-out accuracy (eval mode, running
// statistics) is high.
func TestTrainingLearns(t *testing.T) {
	in := nn.Shape{C: 3, H: 16, W: 16}
	cfg := Config{In: in, Seed: 3, Smoothing: 0.05,
		SGD: optim.SGDConfig{Momentum: 0.9, Nesterov: true, WeightDecay: 5e-4}}
	build := func() (nn.Module, error) {
		return nn.NewCNN(nn.CNNConfig{Widths: []int{8, 16}, Blocks: []int{1, 1}, Classes: 10})
	}
	dp, err := NewDataParallel(cpus(t, 2, 1), build, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(8, 8))
	const steps, batch = 40, 32
	sched := optim.NewOneCycle(0.2, steps)
	var first, last float64
	for s := range steps {
		x, labels := colourData(r, batch, in)
		dp.Optimizer().SetMomentum(sched.Momentum(s))
		st, err := dp.Step(x, labels, sched.LR(s))
		if err != nil {
			t.Fatal(err)
		}
		if s < 3 {
			first += st.Loss / 3
		}
		if s >= steps-3 {
			last += st.Loss / 3
		}
	}
	x, labels := colourData(r, 200, in)
	ev, err := dp.Evaluate(x, labels)
	if err != nil {
		t.Fatal(err)
	}
	acc := float64(ev.Correct) / float64(ev.N)
	t.Logf("loss %.3f → %.3f, held-out accuracy %.3f (eval loss %.3f)", first, last, acc, ev.Loss)
	if last > 0.5*first {
		t.Errorf("loss fell only from %.3f to %.3f", first, last)
	}
	if acc < 0.9 {
		t.Errorf("held-out accuracy %.3f, want ≥ 0.9", acc)
	}
}
