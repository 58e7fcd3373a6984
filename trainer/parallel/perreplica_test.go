package parallel

import (
	"testing"

	"github.com/loaderd/loaderd/trainer/nn"
	"github.com/loaderd/loaderd/trainer/optim"
)

// sliceGrads runs forward and backward of a fresh one-device model on one
// slice with dlogits scaled by scale and returns its gradients and state.
func sliceGrads(t *testing.T, build Builder, cfg Config, x []float32, labels []int32, scale float32) (g, s []float32) {
	t.Helper()
	dev := cpus(t, 1, 1)[0]
	root, _ := build()
	m, err := nn.NewModel(dev, root, cfg.In, cfg.Seed)
	if err != nil {
		t.Fatal(err)
	}
	n := len(labels)
	xt, _ := m.Input(n)
	lab, _ := m.Labels(n)
	dev.CopyIn(xt.Buf, x)
	dev.CopyInInt32(lab, labels)
	y, err := m.Forward(xt)
	if err != nil {
		t.Fatal(err)
	}
	loss := nn.NewSoftmaxCrossEntropy(cfg.Smoothing)
	if _, err := loss.Forward(m.Ctx(), y, lab); err != nil {
		t.Fatal(err)
	}
	dl, _ := loss.Backward(m.Ctx(), scale)
	if err := m.Backward(dl); err != nil {
		t.Fatal(err)
	}
	return download(t, dev, m.Grads()), download(t, dev, m.StateBuf())
}

// TestDataParallelPerReplicaBN pins down the semantics without SyncBN: each
// replica normalises with its own slice's statistics, the gradient is the
// N-weighted sum of the slices' gradients, and the running statistics are
// replica 0's (broadcast).
func TestDataParallelPerReplicaBN(t *testing.T) {
	cfg := testConfig()
	cfg.SGD = optim.SGDConfig{} // plain SGD: w1 = w0 − lr·g
	const n, k, lr = 7, 2, 0.1
	b := batches(1, n)[0]
	dp, err := NewDataParallel(cpus(t, k, 1), buildCNN, cfg)
	if err != nil {
		t.Fatal(err)
	}
	m0 := dp.Model(0)
	w0 := download(t, m0.Device(), m0.Weights())
	if _, err := dp.Step(b.x, b.labels, lr); err != nil {
		t.Fatal(err)
	}
	want := append([]float32(nil), w0...)
	var state0 []float32
	sz := small.Size()
	for i := range k {
		lo, hi := n*i/k, n*(i+1)/k
		g, s := sliceGrads(t, buildCNN, cfg, b.x[lo*sz:hi*sz], b.labels[lo:hi], 1.0/n)
		for j := range want {
			want[j] -= lr * g[j]
		}
		if i == 0 {
			state0 = s
		}
	}
	for i := range k {
		m := dp.Model(i)
		if d := maxRelDiff(download(t, m.Device(), m.Weights()), want); d > 1e-6 {
			t.Errorf("replica %d weights differ from the weighted slice gradients by %.3g", i, d)
		}
		if d := maxRelDiff(download(t, m.Device(), m.StateBuf()), state0); d != 0 {
			t.Errorf("replica %d running stats are not replica 0's (diff %.3g)", i, d)
		}
	}
}

// TestBroadcastAfterLoad: a checkpoint loaded into replica 0 reaches all.
func TestBroadcastAfterLoad(t *testing.T) {
	cfg := testConfig()
	dp, err := NewDataParallel(cpus(t, 3, 1), buildCNN, cfg)
	if err != nil {
		t.Fatal(err)
	}
	m0 := dp.Model(0)
	m0.Device().Fill(m0.Weights(), 0.25)
	m0.Device().Fill(m0.StateBuf(), 0.5)
	if err := dp.Broadcast(); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 3; i++ {
		m := dp.Model(i)
		w, s := download(t, m.Device(), m.Weights()), download(t, m.Device(), m.StateBuf())
		if w[0] != 0.25 || w[len(w)-1] != 0.25 || s[0] != 0.5 || s[len(s)-1] != 0.5 {
			t.Errorf("replica %d did not receive replica 0's parameters", i)
		}
	}
}
