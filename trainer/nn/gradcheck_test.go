package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/loaderd/loaderd/trainer/tensor"
)

func newCPU(t testing.TB, workers int) *tensor.CPU {
	t.Helper()
	d, err := tensor.NewCPU(t.Name(), workers)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func to64(v []float32) []float64 {
	o := make([]float64, len(v))
	for i, x := range v {
		o[i] = float64(x)
	}
	return o
}

func to32(v []float64) []float32 {
	o := make([]float32, len(v))
	for i, x := range v {
		o[i] = float32(x)
	}
	return o
}

func readBuf(t testing.TB, d tensor.Device, b tensor.Buffer) []float32 {
	t.Helper()
	v := make([]float32, b.Len())
	if err := d.CopyOut(v, b); err != nil {
		t.Fatal(err)
	}
	return v
}

// inputKind shapes test inputs so that finite differences never straddle a
// kink of ReLU or a tie of max-pooling.
type inputKind int

const (
	inputNormal inputKind = iota
	inputAwayFromZero
	inputDistinct
)

func makeInput(r *rand.Rand, n int, kind inputKind) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = r.NormFloat64()
	}
	switch kind {
	case inputAwayFromZero:
		for i, v := range x {
			x[i] = math.Copysign(math.Abs(v)+0.05, v)
		}
	case inputDistinct:
		for i, p := range r.Perm(n) {
			x[i] = float64(p)*0.05 - float64(n)*0.025 + r.Float64()*0.01
		}
	}
	return x
}

type gradCase struct {
	name  string
	mod   func() Module
	in    Shape
	n     int
	train bool
	kind  inputKind
}

func TestGradCheckLayers(t *testing.T) {
	cases := []gradCase{
		{"linear", func() Module { return NewLinear(5, 4, true) }, Shape{5, 1, 1}, 3, true, inputNormal},
		{"linear/nobias", func() Module { return NewLinear(7, 3, false) }, Shape{7, 1, 1}, 2, true, inputNormal},
		{"conv/k3s1p1/bias", func() Module { return NewConv2d(3, 4, 3, 1, 1, true) }, Shape{3, 6, 5}, 2, true, inputNormal},
		{"conv/k3s2p1", func() Module { return NewConv2d(2, 3, 3, 2, 1, false) }, Shape{2, 7, 6}, 3, true, inputNormal},
		{"conv/k1s2p0", func() Module { return NewConv2d(3, 2, 1, 2, 0, false) }, Shape{3, 5, 5}, 2, true, inputNormal},
		{"conv/k2s1p0/n1", func() Module { return NewConv2d(2, 2, 2, 1, 0, true) }, Shape{2, 4, 4}, 1, true, inputNormal},
		{"relu", func() Module { return NewReLU() }, Shape{2, 3, 3}, 2, true, inputAwayFromZero},
		{"maxpool/k2s2", func() Module { return NewMaxPool2d(2, 2) }, Shape{2, 4, 6}, 2, true, inputDistinct},
		{"maxpool/k3s2/overlap", func() Module { return NewMaxPool2d(3, 2) }, Shape{1, 7, 7}, 2, true, inputDistinct},
		{"batchnorm/train", func() Module { return NewBatchNorm2d(3) }, Shape{3, 4, 4}, 4, true, inputNormal},
		{"batchnorm/train/1x1", func() Module { return NewBatchNorm2d(5) }, Shape{5, 1, 1}, 6, true, inputNormal},
		{"batchnorm/eval", func() Module { return NewBatchNorm2d(3) }, Shape{3, 3, 3}, 2, false, inputNormal},
		{"flatten+linear", func() Module { return NewSequential(NewFlatten(), NewLinear(18, 3, true)) }, Shape{2, 3, 3}, 2, true, inputNormal},
		{"avgpool", func() Module { return NewGlobalAvgPool() }, Shape{3, 4, 4}, 2, true, inputNormal},
		{"residual/identity", func() Module { return NewBasicBlock(4, 4, 1) }, Shape{4, 5, 5}, 3, true, inputNormal},
		{"residual/projection", func() Module { return NewBasicBlock(3, 6, 2) }, Shape{3, 6, 6}, 3, true, inputNormal},
		{"mlp", func() Module { return NewMLP(Shape{3, 4, 4}, []int{8, 6}, 5) }, Shape{3, 4, 4}, 3, true, inputNormal},
		{"cnn/train", func() Module {
			m, _ := NewCNN(CNNConfig{Widths: []int{4, 8}, Blocks: []int{1, 1}, Classes: 5})
			return m
		}, Shape{3, 8, 8}, 3, true, inputNormal},
		{"cnn/eval", func() Module {
			m, _ := NewCNN(CNNConfig{Widths: []int{4, 6}, Blocks: []int{1, 1}, Classes: 3})
			return m
		}, Shape{3, 6, 6}, 2, false, inputNormal},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { gradCheck(t, tc) })
	}
}

// TestGradCheckConvChunks forces several im2col chunks per batch, including
// a ragged last one, so the dW accumulation across chunks is checked.
func TestGradCheckConvChunks(t *testing.T) {
	defer func(v int) { convChunkFloats = v }(convChunkFloats)
	g, _ := tensor.NewConvGeom(2, 5, 5, 3, 3, 1, 1)
	convChunkFloats = 2 * (g.K() + 3) * g.P() // two images per chunk
	gradCheck(t, gradCase{"conv/chunks", func() Module { return NewConv2d(2, 3, 3, 1, 1, true) },
		Shape{2, 5, 5}, 5, true, inputNormal})
}

func gradCheck(t *testing.T, tc gradCase) {
	t.Helper()
	r := rand.New(rand.NewPCG(7, uint64(len(tc.name))))
	dev := newCPU(t, 2)
	mod := tc.mod()
	m, err := NewModel(dev, mod, tc.in, 11)
	if err != nil {
		t.Fatal(err)
	}
	m.SetTrain(tc.train)
	rf := &ref{vals: map[*Param][]float64{}, train: tc.train}
	// Move every parameter off its (often constant) initial value.
	for _, p := range mod.Params() {
		v := to64(readBuf(t, dev, p.W))
		for i := range v {
			if strings.HasSuffix(p.Name, "running_var") {
				v[i] = 0.5 + r.Float64()
			} else {
				v[i] += 0.3 * r.NormFloat64()
			}
		}
		rf.vals[p] = v
		if err := dev.CopyIn(p.W, to32(v)); err != nil {
			t.Fatal(err)
		}
	}
	x64 := makeInput(r, tc.n*tc.in.Size(), tc.kind)
	xt, err := m.Input(tc.n)
	if err != nil {
		t.Fatal(err)
	}
	if err := dev.CopyIn(xt.Buf, to32(x64)); err != nil {
		t.Fatal(err)
	}
	y, err := m.Forward(xt)
	if err != nil {
		t.Fatal(err)
	}
	yRef, outSh := rf.forward(mod, x64, tc.n, tc.in)
	if outSh != m.Out() || y.Shape != outSh {
		t.Fatalf("shape: got %v, reference %v, model %v", y.Shape, outSh, m.Out())
	}
	compare(t, "forward", to64(readBuf(t, dev, y.Buf)), yRef, 1e-4)

	rw := make([]float64, len(yRef)) // loss = Σ y·rw
	for i := range rw {
		rw[i] = r.NormFloat64()
	}
	dy, err := (&scratch{}).out(m.Ctx(), tc.n, outSh)
	if err != nil {
		t.Fatal(err)
	}
	if err := dev.CopyIn(dy.Buf, to32(rw)); err != nil {
		t.Fatal(err)
	}
	dx, err := mod.Backward(m.Ctx(), dy, true)
	if err != nil {
		t.Fatal(err)
	}
	loss := func(x []float64) float64 {
		y, _ := rf.forward(mod, x, tc.n, tc.in)
		s := 0.0
		for i, v := range y {
			s += v * rw[i]
		}
		return s
	}
	fdCheck(t, r, "dx", to64(readBuf(t, dev, dx.Buf)), x64, func() float64 { return loss(x64) })
	for _, p := range m.Params() {
		fdCheck(t, r, "d"+p.Name, to64(readBuf(t, dev, p.G)), rf.vals[p], func() float64 { return loss(x64) })
	}
}

// fdCheck compares analytic gradients with central differences of f in
// float64 over up to 24 sampled coordinates of v (perturbed in place).
func fdCheck(t *testing.T, r *rand.Rand, name string, got, v []float64, f func() float64) {
	t.Helper()
	if len(got) != len(v) {
		t.Fatalf("%s: %d gradients for %d values", name, len(got), len(v))
	}
	idx := r.Perm(len(v))
	if len(idx) > 24 {
		idx = idx[:24]
	}
	const h = 1e-6
	num, ana := make([]float64, len(idx)), make([]float64, len(idx))
	for k, i := range idx {
		old := v[i]
		v[i] = old + h
		fp := f()
		v[i] = old - h
		fm := f()
		v[i] = old
		num[k], ana[k] = (fp-fm)/(2*h), got[i]
	}
	compare(t, name, ana, num, 2e-3)
}

// compare checks |got−want| ≤ tol·(max|want| + |want|) element-wise, with
// an absolute floor for all-zero tensors.
func compare(t *testing.T, name string, got, want []float64, tol float64) {
	t.Helper()
	scale := 1e-6
	for _, w := range want {
		scale = math.Max(scale, math.Abs(w))
	}
	for i := range want {
		if d := math.Abs(got[i] - want[i]); d > tol*(scale+math.Abs(want[i])) || math.IsNaN(got[i]) {
			t.Errorf("%s[%d]: got %.7g, want %.7g (scale %.3g)", name, i, got[i], want[i], scale)
			return
		}
	}
}

func TestGradCheckSoftmaxCE(t *testing.T) {
	for _, eps := range []float32{0, 0.1} {
		t.Run(fmt.Sprintf("smoothing=%g", eps), func(t *testing.T) {
			r := rand.New(rand.NewPCG(3, 3))
			dev := newCPU(t, 2)
			const n, c = 5, 7
			logits := makeInput(r, n*c, inputNormal)
			for i := range logits {
				logits[i] *= 3
			}
			labels := make([]int32, n)
			for i := range labels {
				labels[i] = int32(r.IntN(c))
			}
			ctx := &Ctx{Dev: dev, Train: true}
			lt, _ := (&scratch{}).out(ctx, n, Shape{c, 1, 1})
			lb, _ := (&scratch{}).get(dev, tensor.I32, n)
			if err := dev.CopyIn(lt.Buf, to32(logits)); err != nil {
				t.Fatal(err)
			}
			if err := dev.CopyInInt32(lb, labels); err != nil {
				t.Fatal(err)
			}
			ce := NewSoftmaxCrossEntropy(eps)
			st, err := ce.Forward(ctx, lt, lb)
			if err != nil {
				t.Fatal(err)
			}
			stats := readBuf(t, dev, st)
			want := refCE(logits, labels, n, c, float64(eps))
			compare(t, "loss", []float64{float64(stats[0])}, []float64{want}, 1e-5)
			correct := 0
			for i := 0; i < n; i++ {
				best := 0
				for j := range c {
					if logits[i*c+j] > logits[i*c+best] {
						best = j
					}
				}
				if int32(best) == labels[i] {
					correct++
				}
			}
			if int(stats[1]) != correct {
				t.Errorf("correct = %v, want %d", stats[1], correct)
			}
			dl, err := ce.Backward(ctx, 1/float32(n))
			if err != nil {
				t.Fatal(err)
			}
			fdCheck(t, r, "dlogits", to64(readBuf(t, dev, dl.Buf)), logits, func() float64 {
				return refCE(logits, labels, n, c, float64(eps))
			})
		})
	}
}
