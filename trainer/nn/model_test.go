package nn

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/loaderd/loaderd/trainer/tensor"
)

// TestBatchNormRunningStats checks PyTorch's update: r ← (1−m)·r + m·batch
// with the unbiased variance, from r = (0, 1), over two batches.
func TestBatchNormRunningStats(t *testing.T) {
	dev := newCPU(t, 2)
	bn := NewBatchNorm2d(2)
	bn.Momentum = 0.25
	in := Shape{2, 3, 3}
	m, err := NewModel(dev, bn, in, 1)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 1))
	const n = 4
	wantM, wantV := []float64{0, 0}, []float64{1, 1}
	for step := 0; step < 2; step++ {
		x := makeInput(r, n*in.Size(), inputNormal)
		for i := range x {
			x[i] = 3*x[i] + float64(step) + 1
		}
		xt, _ := m.Input(n)
		if err := dev.CopyIn(xt.Buf, to32(x)); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Forward(xt); err != nil {
			t.Fatal(err)
		}
		for c := 0; c < 2; c++ {
			var vals []float64
			for i := 0; i < n; i++ {
				vals = append(vals, x[(i*2+c)*9:(i*2+c)*9+9]...)
			}
			mean, ss := 0.0, 0.0
			for _, v := range vals {
				mean += v / float64(len(vals))
			}
			for _, v := range vals {
				ss += (v - mean) * (v - mean)
			}
			wantM[c] = 0.75*wantM[c] + 0.25*mean
			wantV[c] = 0.75*wantV[c] + 0.25*ss/float64(len(vals)-1)
		}
	}
	compare(t, "running_mean", to64(readBuf(t, dev, bn.rmean.W)), wantM, 1e-6)
	compare(t, "running_var", to64(readBuf(t, dev, bn.rvar.W)), wantV, 1e-6)
	// Eval forward must not touch them.
	m.SetTrain(false)
	xt, _ := m.Input(n)
	if _, err := m.Forward(xt); err != nil {
		t.Fatal(err)
	}
	compare(t, "running_mean after eval", to64(readBuf(t, dev, bn.rmean.W)), wantM, 1e-6)
}

func cnnModel(t testing.TB, dev tensor.Device, seed uint64) *Model {
	t.Helper()
	root, err := NewCNN(DefaultCNN)
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewModel(dev, root, CIFAR, seed)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestModelDeterministicInit(t *testing.T) {
	a, b := cnnModel(t, newCPU(t, 1), 5), cnnModel(t, newCPU(t, 3), 5)
	c := cnnModel(t, newCPU(t, 1), 6)
	wa := readBuf(t, a.Device(), a.Weights())
	if !equal32(wa, readBuf(t, b.Device(), b.Weights())) {
		t.Error("same seed, different devices: weights differ")
	}
	if equal32(wa, readBuf(t, c.Device(), c.Weights())) {
		t.Error("different seeds give equal weights")
	}
	if a.NumParams() < 50_000 || a.NumParams() > 120_000 {
		t.Errorf("DefaultCNN has %d parameters, want ≈78k", a.NumParams())
	}
	// Kaiming: the stem weight's std should be near sqrt(2/27).
	p := a.Params()[0]
	w := readBuf(t, a.Device(), p.W)
	ss := 0.0
	for _, v := range w {
		ss += float64(v * v)
	}
	if std, want := math.Sqrt(ss/float64(len(w))), math.Sqrt(2.0/27); math.Abs(std-want) > 0.2*want {
		t.Errorf("%s std %.3f, want ≈%.3f", p.Name, std, want)
	}
}

func equal32(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

func TestCheckpointRoundTrip(t *testing.T) {
	dev := newCPU(t, 1)
	a, b := cnnModel(t, dev, 1), cnnModel(t, dev, 2)
	// Give the running stats non-default values.
	dev.Fill(a.StateBuf(), 0.5)
	var buf bytes.Buffer
	if err := a.Save(&buf); err != nil {
		t.Fatal(err)
	}
	raw := buf.Bytes()
	if err := b.Load(bytes.NewReader(raw)); err != nil {
		t.Fatal(err)
	}
	if !equal32(readBuf(t, dev, a.Weights()), readBuf(t, dev, b.Weights())) ||
		!equal32(readBuf(t, dev, a.StateBuf()), readBuf(t, dev, b.StateBuf())) {
		t.Fatal("loaded model differs from saved one")
	}
	bad := map[string][]byte{
		"truncated": raw[:len(raw)/2],
		"flipped":   append(append([]byte{}, raw[:100]...), append([]byte{raw[100] ^ 1}, raw[101:]...)...),
		"empty":     nil,
	}
	for name, data := range bad {
		if err := b.Load(bytes.NewReader(data)); !errors.Is(err, ErrCheckpoint) {
			t.Errorf("%s: err = %v, want ErrCheckpoint", name, err)
		}
	}
	mlp, err := NewModel(dev, NewMLP(CIFAR, []int{8}, 10), CIFAR, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := mlp.Load(bytes.NewReader(raw)); !errors.Is(err, ErrCheckpoint) {
		t.Errorf("loading a CNN checkpoint into an MLP: err = %v", err)
	}
}

func TestShapeErrors(t *testing.T) {
	dev := newCPU(t, 1)
	cases := []struct {
		name string
		mod  Module
		in   Shape
	}{
		{"linear wants flat input", NewLinear(12, 3, true), Shape{3, 2, 2}},
		{"conv channels", NewConv2d(4, 3, 3, 1, 1, false), Shape{3, 8, 8}},
		{"conv kernel too large", NewConv2d(3, 3, 5, 1, 0, false), Shape{3, 4, 4}},
		{"pool too large", NewMaxPool2d(3, 1), Shape{1, 2, 2}},
		{"residual mismatch", NewResidual(NewConv2d(3, 4, 3, 1, 1, false), nil), Shape{3, 4, 4}},
	}
	for _, tc := range cases {
		if _, err := NewModel(dev, tc.mod, tc.in, 1); !errors.Is(err, ErrShape) && !errors.Is(err, tensor.ErrArg) {
			t.Errorf("%s: err = %v", tc.name, err)
		}
	}
	m, err := NewModel(dev, NewMLP(Shape{2, 2, 2}, nil, 3), Shape{2, 2, 2}, 1)
	if err != nil {
		t.Fatal(err)
	}
	x, _ := (&scratch{}).out(m.Ctx(), 2, Shape{2, 2, 1})
	if _, err := m.Forward(x); !errors.Is(err, ErrShape) {
		t.Errorf("wrong input shape: err = %v", err)
	}
	if _, err := NewSoftmaxCrossEntropy(0).Backward(m.Ctx(), 1); !errors.Is(err, ErrState) {
		t.Errorf("loss backward before forward: err = %v", err)
	}
	lab, _ := m.Labels(2)
	if err := dev.CopyInInt32(lab, []int32{0, 7}); err != nil {
		t.Fatal(err)
	}
	xi, _ := m.Input(2)
	y, err := m.Forward(xi)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewSoftmaxCrossEntropy(0).Forward(m.Ctx(), y, lab); !errors.Is(err, tensor.ErrArg) {
		t.Errorf("label out of range: err = %v", err)
	}
}

// TestStepAllocatesNothing: once buffers exist, forward, loss and backward
// allocate nothing, whatever the goroutine budget.
func TestStepAllocatesNothing(t *testing.T) {
	for _, workers := range []int{1, 2} {
		dev := newCPU(t, workers)
		root, _ := NewCNN(CNNConfig{Widths: []int{4, 8}, Blocks: []int{1, 1}, Classes: 10})
		m, err := NewModel(dev, root, Shape{3, 16, 16}, 1)
		if err != nil {
			t.Fatal(err)
		}
		const n = 8
		x, _ := m.Input(n)
		lab, _ := m.Labels(n)
		loss := NewSoftmaxCrossEntropy(0.1)
		step := func() {
			y, err := m.Forward(x)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := loss.Forward(m.Ctx(), y, lab); err != nil {
				t.Fatal(err)
			}
			dl, _ := loss.Backward(m.Ctx(), 1.0/n)
			if err := m.Backward(dl); err != nil {
				t.Fatal(err)
			}
		}
		step()
		if a := testing.AllocsPerRun(5, step); a != 0 {
			t.Errorf("workers=%d: %v allocations per step", workers, a)
		}
	}
}
