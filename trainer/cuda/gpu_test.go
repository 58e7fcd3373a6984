package cuda

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/loaderd/loaderd/trainer/tensor"
)

// openGPU opens GPU 0 or skips; LOADERD_REQUIRE_GPU=1 turns the skip into a
// failure (for sessions on a GPU machine).
func openGPU(t testing.TB, cfg Config) *Device {
	t.Helper()
	d, err := New(cfg)
	if err != nil {
		if os.Getenv("LOADERD_REQUIRE_GPU") == "1" {
			t.Fatalf("LOADERD_REQUIRE_GPU=1: %v", err)
		}
		if !errors.Is(err, ErrNoDriver) && !errors.Is(err, ErrNoDevice) {
			t.Fatalf("New: %v (want ErrNoDriver or ErrNoDevice without a GPU)", err)
		}
		t.Skipf("no GPU: %v", err)
	}
	t.Logf("%v: kernels loaded as %s, cuBLAS %v", d, d.Code(), d.HasCUBLAS())
	t.Cleanup(func() { d.Close() })
	return d
}

// spec describes one input buffer, filled identically on both devices.
type spec struct {
	n    int
	kind byte    // 'r' uniform [-1, 1), 'p' [0.5, 1.5), 'l' labels < c, 'k' constant v, 'z' zeros
	c    int     // label range
	v    float32 // constant
	mul  float32 // scale for 'r' (0: 1)
}

func r(n int) spec             { return spec{n: n, kind: 'r'} }
func rs(n int, m float32) spec { return spec{n: n, kind: 'r', mul: m} }
func pos(n int) spec           { return spec{n: n, kind: 'p'} }
func ties(n int) spec          { return spec{n: n, kind: 'q'} } // values in {−1, 0, 1}: ties everywhere
func lab(n, c int) spec        { return spec{n: n, kind: 'l', c: c} }
func konst(v float32) spec     { return spec{n: 1, kind: 'k', v: v} }
func idx(n int) spec           { return spec{n: n, kind: 'i'} } // I32 zeros
// halves are values at every exponent (with half-way mantissas, fp16's
// overflow and subnormal edges); with v ≠ 0 the last element is v (Inf, NaN).
func halves(n int, v float32) spec { return spec{n: n, kind: 'h', v: v} }

type gpuCase struct {
	name string
	in   []spec
	run  func(d tensor.Device, b []tensor.Buffer)
	tol  float64
}

func cases() []gpuCase {
	cg, _ := tensor.NewConvGeom(3, 9, 7, 3, 3, 2, 1)
	cg1, _ := tensor.NewConvGeom(4, 8, 8, 3, 3, 1, 1)
	pg, _ := tensor.NewPoolGeom(4, 9, 8, 3, 2) // overlapping windows
	pg2, _ := tensor.NewPoolGeom(4, 8, 8, 2, 2)
	const n, c, hw = 3, 5, 77
	const n2, hw2, n3, hw3 = 2, 300, 200, 3
	N := n * c * hw
	sgd := func(a tensor.SGDArgs) func(d tensor.Device, b []tensor.Buffer) {
		return func(d tensor.Device, b []tensor.Buffer) {
			a := a // each run starts from the same arguments
			d.SGD(b[0], b[1], b[2], a)
			a.First = false
			d.SGD(b[0], b[1], b[2], a)
		}
	}
	gemm := func(ta, tb tensor.Transpose, m, nn, k, pad int, alpha, beta float32) gpuCase {
		ar, ac := m, k
		if ta {
			ar, ac = k, m
		}
		br, bc := k, nn
		if tb {
			br, bc = nn, k
		}
		lda, ldb, ldc := ac+pad, bc+pad, nn+pad
		return gpuCase{name: "gemm", in: []spec{r(max(1, ar*lda)), r(max(1, br*ldb)), r(m * ldc)},
			run: func(d tensor.Device, b []tensor.Buffer) {
				d.Gemm(ta, tb, m, nn, k, alpha, b[0], lda, b[1], ldb, beta, b[2], ldc)
			}, tol: 1e-5}
	}
	return []gpuCase{
		{"fill", []spec{r(1001)}, func(d tensor.Device, b []tensor.Buffer) { d.Fill(b[0], 3.5) }, 0},
		{"scale", []spec{r(1001)}, func(d tensor.Device, b []tensor.Buffer) { d.Scale(b[0], -0.7) }, 0},
		{"axpy", []spec{r(1001), r(1001)}, func(d tensor.Device, b []tensor.Buffer) { d.Axpy(0.3, b[0], b[1]) }, 0},
		{"add", []spec{r(1001), r(1001), r(1001)}, func(d tensor.Device, b []tensor.Buffer) {
			d.Add(b[2], b[0], b[1])
			d.Add(b[0], b[0], b[2]) // aliased
		}, 0},
		{"divscalar", []spec{r(1001), r(1001), konst(7)}, func(d tensor.Device, b []tensor.Buffer) { d.DivScalar(b[1], b[0], b[2]) }, 0},
		{"relu", []spec{r(1001), r(1001), r(1001), r(1001)}, func(d tensor.Device, b []tensor.Buffer) {
			d.ReLU(b[1], b[0])
			d.ReLUBackward(b[3], b[2], b[1])
		}, 0},
		{"bn_invstd", []spec{pos(c), r(c)}, func(d tensor.Device, b []tensor.Buffer) { d.BNInvStd(b[1], b[0], 1e-5) }, 0},
		{"bn_running", []spec{r(c), pos(c), r(c), pos(c), konst(64)}, func(d tensor.Device, b []tensor.Buffer) {
			d.BNRunning(b[0], b[1], b[2], b[3], b[4], 0.1)
		}, 0},
		{"addbias", []spec{r(N), r(c)}, func(d tensor.Device, b []tensor.Buffer) { d.AddBias(b[0], b[1], n, c, hw) }, 0},
		{"rowsum", []spec{r(7 * 300), r(7)}, func(d tensor.Device, b []tensor.Buffer) { d.RowSum(b[1], b[0], 7, 300, 0.5) }, 1e-6},
		{"rowbroadcast", []spec{r(7), r(7 * 30)}, func(d tensor.Device, b []tensor.Buffer) { d.RowBroadcast(b[1], b[0], 7, 30, 2) }, 0},
		{"channelsum", []spec{r(N), r(c)}, func(d tensor.Device, b []tensor.Buffer) { d.ChannelSum(b[1], b[0], n, c, hw) }, 1e-6},
		{"channelsqdev", []spec{r(N), r(c), r(c)}, func(d tensor.Device, b []tensor.Buffer) { d.ChannelSqDev(b[2], b[0], b[1], n, c, hw) }, 1e-6},
		// The per-channel reductions' two ways to cover a channel: rows
		// wider than a block (n2, hw2), and narrow rows with more of them
		// than a block covers at once (n3, hw3: 85 rows a pass on a GPU, 2 in
		// the emulator's 8-thread blocks).
		{"channelsum wide", []spec{r(n2 * c * hw2), r(c)}, func(d tensor.Device, b []tensor.Buffer) { d.ChannelSum(b[1], b[0], n2, c, hw2) }, 1e-6},
		{"channelsum narrow", []spec{r(n3 * c * hw3), r(c)}, func(d tensor.Device, b []tensor.Buffer) { d.ChannelSum(b[1], b[0], n3, c, hw3) }, 1e-6},
		{"channelsqdev wide", []spec{r(n2 * c * hw2), r(c), r(c)}, func(d tensor.Device, b []tensor.Buffer) { d.ChannelSqDev(b[2], b[0], b[1], n2, c, hw2) }, 1e-6},
		{"channelsqdev narrow", []spec{r(n3 * c * hw3), r(c), r(c)}, func(d tensor.Device, b []tensor.Buffer) { d.ChannelSqDev(b[2], b[0], b[1], n3, c, hw3) }, 1e-6},
		{"bn_gradsums wide", []spec{r(c), r(c), r(n2 * c * hw2), r(n2 * c * hw2), r(c), pos(c)}, func(d tensor.Device, b []tensor.Buffer) {
			d.BNGradSums(b[0], b[1], b[2], b[3], b[4], b[5], n2, c, hw2)
		}, 1e-6},
		{"bn_gradsums narrow", []spec{r(c), r(c), r(n3 * c * hw3), r(n3 * c * hw3), r(c), pos(c)}, func(d tensor.Device, b []tensor.Buffer) {
			d.BNGradSums(b[0], b[1], b[2], b[3], b[4], b[5], n3, c, hw3)
		}, 1e-6},
		{"transpose12", []spec{r(3 * 5 * 7), r(3 * 5 * 7)}, func(d tensor.Device, b []tensor.Buffer) { d.Transpose12(b[1], b[0], 3, 5, 7) }, 0},
		{"im2col", []spec{r(2 * 3 * 9 * 7), r(cg.K() * 2 * cg.P())}, func(d tensor.Device, b []tensor.Buffer) { d.Im2Col(b[1], b[0], cg, 2) }, 0},
		{"col2im", []spec{r(cg.K() * 2 * cg.P()), r(2 * 3 * 9 * 7)}, func(d tensor.Device, b []tensor.Buffer) { d.Col2Im(b[1], b[0], cg, 2) }, 1e-6},
		{"col2im stride 1", []spec{r(cg1.K() * 2 * cg1.P()), r(2 * 4 * 8 * 8)}, func(d tensor.Device, b []tensor.Buffer) { d.Col2Im(b[1], b[0], cg1, 2) }, 1e-6},
		{"maxpool overlap", []spec{r(2 * 4 * 9 * 8), r(2 * 4 * pg.OH * pg.OW), idx(2 * 4 * pg.OH * pg.OW), r(2 * 4 * pg.OH * pg.OW), r(2 * 4 * 9 * 8)},
			func(d tensor.Device, b []tensor.Buffer) {
				d.MaxPool(b[1], b[2], b[0], pg, 2)
				d.MaxPoolBackward(b[4], b[3], b[2], pg, 2)
			}, 1e-6},
		{"maxpool 2x2", []spec{r(2 * 4 * 64), r(2 * 4 * 16), idx(2 * 4 * 16), r(2 * 4 * 16), r(2 * 4 * 64)},
			func(d tensor.Device, b []tensor.Buffer) {
				d.MaxPool(b[1], b[2], b[0], pg2, 2)
				d.MaxPoolBackward(b[4], b[3], b[2], pg2, 2)
			}, 0},
		{"maxpool ties", []spec{ties(2 * 4 * 9 * 8), r(2 * 4 * pg.OH * pg.OW), idx(2 * 4 * pg.OH * pg.OW), r(2 * 4 * pg.OH * pg.OW), r(2 * 4 * 9 * 8)},
			func(d tensor.Device, b []tensor.Buffer) {
				d.MaxPool(b[1], b[2], b[0], pg, 2)
				d.MaxPoolBackward(b[4], b[3], b[2], pg, 2)
			}, 1e-6},
		{"count_correct ties", []spec{r(1), ties(300 * 10), lab(300, 10)}, func(d tensor.Device, b []tensor.Buffer) {
			d.CountCorrect(b[0], b[1], b[2], 300, 10)
		}, 0},
		{"bn_forward", []spec{r(N), r(N), r(c), pos(c), pos(c), r(c)}, func(d tensor.Device, b []tensor.Buffer) {
			d.BNForward(b[1], b[0], b[2], b[3], b[4], b[5], n, c, hw)
		}, 0},
		{"bn_gradsums", []spec{r(c), r(c), r(N), r(N), r(c), pos(c)}, func(d tensor.Device, b []tensor.Buffer) {
			d.BNGradSums(b[0], b[1], b[2], b[3], b[4], b[5], n, c, hw)
		}, 1e-6},
		{"bn_backward", []spec{r(N), r(N), r(N), r(c), pos(c), pos(c), r(c), r(c), konst(float32(n * hw))},
			func(d tensor.Device, b []tensor.Buffer) {
				d.BNBackward(b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], n, c, hw)
			}, 1e-6},
		{"softmax_ce", []spec{r(33), r(33 * 10), rs(33*10, 5), lab(33, 10), r(33 * 10)}, func(d tensor.Device, b []tensor.Buffer) {
			d.SoftmaxCE(b[0], b[1], b[2], b[3], 33, 10, 0.1)
			d.SoftmaxCEBackward(b[4], b[1], b[3], 33, 10, 0.1, 1.0/33)
		}, 1e-6},
		{"count_correct", []spec{r(1), r(300 * 10), lab(300, 10)}, func(d tensor.Device, b []tensor.Buffer) {
			d.CountCorrect(b[0], b[1], b[2], 300, 10)
		}, 0},
		{"sgd momentum", []spec{r(1001), r(1001), r(1001)}, sgd(tensor.SGDArgs{LR: 0.1, Momentum: 0.9, First: true}), 0},
		{"sgd nesterov wd", []spec{r(1001), r(1001), r(1001)}, sgd(tensor.SGDArgs{LR: 0.1, Momentum: 0.9, WeightDecay: 5e-4, Nesterov: true, First: true}), 0},
		{"sgd dampening", []spec{r(1001), r(1001), r(1001)}, sgd(tensor.SGDArgs{LR: 0.05, Momentum: 0.5, Dampening: 0.3}), 0},
		{"sgd plain", []spec{r(1001), r(1001), r(1)}, func(d tensor.Device, b []tensor.Buffer) {
			d.SGD(b[0], b[1], tensor.Buffer{}, tensor.SGDArgs{LR: 0.1, WeightDecay: 1e-4})
		}, 0},
		{"copy", []spec{r(1001), r(1001)}, func(d tensor.Device, b []tensor.Buffer) { d.Copy(b[1], b[0]) }, 0},
		{"round bf16", []spec{halves(3001, 0)}, func(d tensor.Device, b []tensor.Buffer) { d.Round(b[0], tensor.BF16) }, 0},
		{"round fp16", []spec{halves(3001, 0)}, func(d tensor.Device, b []tensor.Buffer) { d.Round(b[0], tensor.FP16) }, 0},
		{"round nan", []spec{halves(64, float32(math.NaN()))}, func(d tensor.Device, b []tensor.Buffer) {
			d.Round(b[0], tensor.FP16)
			d.Round(b[0], tensor.BF16)
		}, 0},
		{"nonfinite clean", []spec{konst(5), halves(3001, 0)}, func(d tensor.Device, b []tensor.Buffer) { d.NonFinite(b[0], b[1]) }, 0},
		{"nonfinite inf", []spec{konst(5), halves(3001, float32(math.Inf(-1)))}, func(d tensor.Device, b []tensor.Buffer) { d.NonFinite(b[0], b[1]) }, 0},
		{"nonfinite nan", []spec{konst(5), halves(300001, float32(math.NaN()))}, func(d tensor.Device, b []tensor.Buffer) { d.NonFinite(b[0], b[1]) }, 0},
		gemm(tensor.NoTrans, tensor.NoTrans, 37, 29, 300, 0, 1, 0),
		gemm(tensor.Trans, tensor.NoTrans, 37, 29, 45, 3, 0.5, 1),
		gemm(tensor.NoTrans, tensor.Trans, 64, 10, 128, 1, 1, 0.25),
		gemm(tensor.Trans, tensor.Trans, 5, 70, 33, 2, -1, 0),
		gemm(tensor.NoTrans, tensor.NoTrans, 8, 9, 0, 1, 1, 0.5), // k = 0: C = beta·C
	}
}

// fill returns host data for s (identical for a given rng state).
func fill(rng *rand.Rand, s spec) ([]float32, []int32) {
	switch s.kind {
	case 'l':
		v := make([]int32, s.n)
		for i := range v {
			v[i] = int32(rng.IntN(s.c))
		}
		return nil, v
	case 'i':
		return nil, make([]int32, s.n)
	}
	v := make([]float32, s.n)
	for i := range v {
		switch s.kind {
		case 'r':
			m := s.mul
			if m == 0 {
				m = 1
			}
			v[i] = m * (2*rng.Float32() - 1)
		case 'p':
			v[i] = 0.5 + rng.Float32()
		case 'q':
			v[i] = float32(rng.IntN(3) - 1)
		case 'k':
			v[i] = s.v
		case 'h':
			v[i] = halfValue(rng)
		}
	}
	if s.kind == 'h' && s.v != 0 {
		v[len(v)-1] = s.v
	}
	return v, nil
}

// runOn allocates and fills the inputs on d, runs the case, and returns
// every f32 buffer's contents afterwards.
func runOn(t *testing.T, d tensor.Device, tc gpuCase, seed uint64) [][]float32 {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	bufs := make([]tensor.Buffer, len(tc.in))
	for i, s := range tc.in {
		f, iv := fill(rng, s)
		typ := tensor.F32
		if iv != nil {
			typ = tensor.I32
		}
		b, err := d.Alloc(typ, s.n)
		if err != nil {
			t.Fatal(err)
		}
		if iv != nil {
			err = d.CopyInInt32(b, iv)
		} else {
			err = d.CopyIn(b, f)
		}
		if err != nil {
			t.Fatal(err)
		}
		bufs[i] = b
	}
	tc.run(d, bufs)
	if err := d.Sync(); err != nil {
		t.Fatalf("%s on %s: %v", tc.name, d.Name(), err)
	}
	var out [][]float32
	for i, b := range bufs {
		if b.DType() != tensor.F32 {
			continue
		}
		h := make([]float32, tc.in[i].n)
		if err := d.CopyOut(h, b); err != nil {
			t.Fatal(err)
		}
		out = append(out, h)
	}
	for _, b := range bufs {
		if err := d.Free(b); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// halfValue draws a float32 whose exponent spans fp16's subnormals to
// beyond its range, with a mantissa that is often a rounding tie.
func halfValue(rng *rand.Rand) float32 {
	exp := uint32(100 + rng.IntN(48)) // 2⁻²⁷ … 2²⁰
	man := rng.Uint32() & 0x7fffff
	switch rng.IntN(4) {
	case 0:
		man = man&^0x1fff | 0x1000 // fp16 tie
	case 1:
		man = man&^0xffff | 0x8000 // bf16 tie
	}
	return math.Float32frombits(rng.Uint32()&0x80000000 | exp<<23 | man)
}

// relErr is the norm-wise relative error max|got−want| / max|want|;
// bit-identical elements (Inf and NaN included) count as no error.
func relErr(got, want []float32) float64 {
	var num, den float64
	for i := range want {
		if math.Float32bits(got[i]) == math.Float32bits(want[i]) {
			if w := math.Abs(float64(want[i])); !math.IsNaN(w) && !math.IsInf(w, 0) {
				den = max(den, w)
			}
			continue
		}
		num = max(num, math.Abs(float64(got[i])-float64(want[i])))
		den = max(den, math.Abs(float64(want[i])))
	}
	if den == 0 {
		return num
	}
	return num / den
}

func compareWithCPU(t *testing.T, g *Device) {
	cpu, err := tensor.NewCPU("cpu", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer cpu.Close()
	for _, tc := range cases() {
		t.Run(tc.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 3; seed++ {
				want := runOn(t, cpu, tc, seed)
				got := runOn(t, g, tc, seed)
				for i := range want {
					// tol 0 still allows 1e-7: the same operations in the
					// same order, but exp/log and sqrt may differ by an ulp.
					if e := relErr(got[i], want[i]); e > max(tc.tol, 1e-7) || math.IsNaN(e) {
						t.Fatalf("seed %d buffer %d: relative error %.3g > %.3g", seed, i, e, max(tc.tol, 1e-7))
					}
				}
			}
		})
	}
}

// Every kernel matches the CPU engine on random inputs (GPU only).
func TestMatchesCPU(t *testing.T) {
	g := openGPU(t, Config{})
	t.Logf("%v, cuBLAS %v", g, g.HasCUBLAS())
	compareWithCPU(t, g)
}

// The reference GEMM kernel, used without cuBLAS, matches too.
func TestMatchesCPUWithoutCUBLAS(t *testing.T) {
	g := openGPU(t, Config{NoCUBLAS: true})
	if g.HasCUBLAS() {
		t.Fatal("NoCUBLAS ignored")
	}
	compareWithCPU(t, g)
}

// A bad label is an argument error at Sync, and the error clears.
func TestBadLabelIsStickyArgError(t *testing.T) { badLabel(t, openGPU(t, Config{})) }

func badLabel(t *testing.T, g *Device) {
	logits, _ := g.Alloc(tensor.F32, 2*3)
	prob, _ := g.Alloc(tensor.F32, 2*3)
	loss, _ := g.Alloc(tensor.F32, 2)
	labels, _ := g.Alloc(tensor.I32, 2)
	for _, bad := range []int32{3, -1} {
		if err := g.CopyInInt32(labels, []int32{1, bad}); err != nil {
			t.Fatal(err)
		}
		g.SoftmaxCE(loss, prob, logits, labels, 2, 3, 0)
		if err := g.Sync(); !errors.Is(err, tensor.ErrArg) {
			t.Fatalf("Sync after label %d: %v, want ErrArg", bad, err)
		}
		if err := g.Sync(); err != nil {
			t.Fatalf("second Sync: %v", err)
		}
	}
	if err := g.CopyInInt32(labels, []int32{1, 2}); err != nil {
		t.Fatal(err)
	}
	g.SoftmaxCE(loss, prob, logits, labels, 2, 3, 0)
	g.SoftmaxCEBackward(prob, prob, labels, 2, 3, 0, 1)
	if err := g.Sync(); err != nil {
		t.Fatalf("good labels after a bad one: %v", err)
	}
}

// Lifecycle errors match the CPU device's.
func lifecycle(t *testing.T, g *Device) {
	cpu, _ := tensor.NewCPU("cpu", 1)
	defer cpu.Close()
	foreign, _ := cpu.Alloc(tensor.F32, 4)
	b, err := g.Alloc(tensor.F32, 8)
	if err != nil {
		t.Fatal(err)
	}
	zeroed := make([]float32, 8)
	for i := range zeroed {
		zeroed[i] = 1
	}
	if err := g.CopyOut(zeroed, b); err != nil || zeroed[7] != 0 {
		t.Fatalf("Alloc not zeroed: %v %v", zeroed, err)
	}
	if err := g.CopyIn(b.Slice(8, 0), nil); err != nil {
		t.Fatalf("empty CopyIn: %v", err)
	}
	if err := g.CopyOut(make([]float32, 3), b); !errors.Is(err, tensor.ErrArg) {
		t.Fatalf("short CopyOut: %v", err)
	}
	g.Axpy(1, foreign, b)
	if err := g.Sync(); !errors.Is(err, tensor.ErrDevice) {
		t.Fatalf("foreign buffer: %v", err)
	}
	if _, err := g.Alloc(tensor.F32, 0); !errors.Is(err, tensor.ErrArg) {
		t.Fatalf("Alloc(0): %v", err)
	}
	g.Fill(tensor.Buffer{}, 1)
	if err := g.Free(b); err != nil {
		t.Fatalf("Free with a sticky error pending: %v", err)
	}
	if err := g.Sync(); !errors.Is(err, tensor.ErrArg) {
		t.Fatalf("sticky error lost by Free: %v", err)
	}
	g.Fill(b, 1)
	if err := g.Sync(); !errors.Is(err, tensor.ErrArg) {
		t.Fatalf("use after free: %v", err)
	}
	c, _ := g.Alloc(tensor.F32, 4)
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	g.Fill(c, 1)
	if err := g.Sync(); !errors.Is(err, tensor.ErrClosed) {
		t.Fatalf("use after Close: %v", err)
	}
	if _, err := g.Alloc(tensor.F32, 4); !errors.Is(err, tensor.ErrClosed) {
		t.Fatalf("Alloc after Close: %v", err)
	}
}

func TestLifecycle(t *testing.T) { lifecycle(t, openGPU(t, Config{})) }
