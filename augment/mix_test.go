package augment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/loaderd/loaderd/client/sample"
)

func TestParseMix(t *testing.T) {
	for _, tc := range []struct {
		in    string
		want  []Op
		canon string
	}{
		{"mixup=0.2", []Op{MixUp{Alpha: 0.2}}, "mixup=0.2"},
		{"CutMix = 1", []Op{CutMix{Alpha: 1}}, "cutmix=1"},
		{"cutmix=1:0.25", []Op{CutMix{Alpha: 1, Switch: 0.25}}, "cutmix=1:0.25"},
		{"normalize=cifar10,out=f16,mixup=0.8,cutmix=1",
			[]Op{ToTensor{}, Normalize{CIFAR10Mean, CIFAR10Std}, Output{DType: sample.F16}, MixUp{Alpha: 0.8}, CutMix{Alpha: 1}},
			"normalize=cifar10,out=f16,mixup=0.8,cutmix=1"},
	} {
		got, err := ParseOps(tc.in)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseOps(%q) = %#v, %v; want %#v", tc.in, got, err, tc.want)
			continue
		}
		if s := FormatOps(got); s != tc.canon {
			t.Errorf("FormatOps(ParseOps(%q)) = %q, want %q", tc.in, s, tc.canon)
		}
		if again, err := ParseOps(FormatOps(got)); err != nil || !reflect.DeepEqual(again, got) {
			t.Errorf("round trip of %q = %#v, %v", tc.in, again, err)
		}
	}
	for _, in := range []string{"mixup", "mixup=", "mixup=x", "mixup=0.2:0.5", "cutmix=1:2:3", "cutmix=1:p", "cutmix"} {
		if _, err := ParseOps(in); !errors.Is(err, ErrSyntax) {
			t.Errorf("ParseOps(%q) = %v, want ErrSyntax", in, err)
		}
	}
}

// TestMixPlacement: batch ops end a float chain, once each; NewPipelineAs
// keeps them last; values_on_client cannot split them off.
func TestMixPlacement(t *testing.T) {
	in := Spec{H: 32, W: 32, C: 3, DType: sample.U8, Layout: sample.CHW}
	for _, tc := range []struct {
		spec string
		bad  string // a piece of the error; "" means the chain folds
	}{
		{"crop=32:4,flip,normalize=cifar10,out=f32,mixup=0.2", ""},
		{"normalize=cifar10,random_erasing,cutmix=1,mixup=0.2", ""},
		{"color_jitter=0.4,normalize=cifar10,out=bf16:hwc,cutmix=1:0.3", ""},
		{"resize=36,center_crop=32,normalize=imagenet,mixup=1", ""},
		{"crop=32:4,mixup=0.2", "mixes float tensors"},
		{"crop=32:4,out=u8,cutmix=1", "mixes float tensors"},
		{"normalize=cifar10,mixup=0.2,out=f16", "end the chain"},
		{"normalize=cifar10,mixup=0.2,random_erasing", "end the chain"},
		{"normalize=cifar10,mixup=0.2,mixup=0.3", "only one"},
		{"normalize=cifar10,mixup=0", "alpha 0"},
		{"normalize=cifar10,cutmix=inf", "alpha +Inf"},
		{"normalize=cifar10,cutmix=1:1.5", "switch probability"},
	} {
		ops, err := ParseOps(tc.spec)
		if err != nil {
			t.Fatalf("ParseOps(%q): %v", tc.spec, err)
		}
		src := in
		if _, ok := ops[0].(Resize); ok {
			src = Spec{C: 3, DType: sample.U8, Layout: sample.HWC}
		}
		p, err := NewPipeline(src, ops...)
		if tc.bad != "" {
			if err == nil || !errors.Is(err, ErrInvalidOp) || !strings.Contains(err.Error(), tc.bad) {
				t.Errorf("NewPipeline(%q) = %v, want an ErrInvalidOp with %q", tc.spec, err, tc.bad)
			}
			continue
		}
		if err != nil {
			t.Errorf("NewPipeline(%q): %v", tc.spec, err)
			continue
		}
		if p.Mixer() == nil || len(p.BatchOps()) == 0 || p.String() != FormatOps(ops) {
			t.Errorf("%q: mixer %v, batch ops %v, String %q", tc.spec, p.Mixer(), p.BatchOps(), p.String())
		}
		if _, err := p.PixelPipeline(); !errors.Is(err, ErrInvalidOp) || !strings.Contains(err.Error(), "finished") {
			t.Errorf("PixelPipeline of %q = %v, want the mix refused", tc.spec, err)
		}
		as, err := NewPipelineAs(src, ops, Output{DType: sample.F16, Layout: sample.HWC}, false)
		if err != nil || as.Mixer() == nil || as.Out().DType != sample.F16 || !isBatchOp(as.Ops()[len(as.Ops())-1]) {
			t.Errorf("NewPipelineAs(%q, f16:hwc) = %v, %v", tc.spec, as, err)
		}
	}
	p, err := NewPipeline(in, CIFARTrain(sample.F32, sample.CHW)...)
	if err != nil || p.Mixer() != nil || p.BatchOps() != nil {
		t.Errorf("a chain without batch ops: %v, mixer %v", err, p.Mixer())
	}
}

// mixReference is MixUp and CutMix written plainly: each sample decoded
// to float32 in (y, x, c) order, the rolled batch read from that copy,
// then encoded back.
func mixReference(data []byte, n int, s Spec, mx sample.Mix) []byte {
	es := s.DType.Size()
	at := func(i, y, x, c int) int {
		return i*s.Bytes() + offset(s.Layout, s.H, s.W, s.C, y, x, c)*es
	}
	load := func(b []byte) float32 {
		switch s.DType {
		case sample.F16:
			return f16to32(binary.LittleEndian.Uint16(b))
		case sample.BF16:
			return bf16to32(binary.LittleEndian.Uint16(b))
		}
		return math.Float32frombits(binary.LittleEndian.Uint32(b))
	}
	orig := make([][]float32, n)
	for i := range n {
		orig[i] = make([]float32, s.Elems())
		for y := range s.H {
			for x := range s.W {
				for c := range s.C {
					orig[i][(y*s.W+x)*s.C+c] = load(data[at(i, y, x, c):])
				}
			}
		}
	}
	lam32, rest32 := float32(mx.Lambda), float32(1-mx.Lambda)
	b := mx.Box
	out := append([]byte(nil), data...)
	for i := range n {
		prev := orig[(i+n-1)%n]
		for y := range s.H {
			for x := range s.W {
				inBox := x >= int(b.X) && x < int(b.X+b.W) && y >= int(b.Y) && y < int(b.Y+b.H)
				for c := range s.C {
					k := (y*s.W+x)*s.C + c
					switch {
					case mx.Kind == sample.MixUp:
						a := float32(orig[i][k] * lam32)
						r := float32(prev[k] * rest32)
						convert(out[at(i, y, x, c):], s.DType, a+r)
					case inBox:
						copy(out[at(i, y, x, c):at(i, y, x, c)+es], data[at((i+n-1)%n, y, x, c):])
					}
				}
			}
		}
	}
	return out
}

// TestMixMatchesReference holds Apply to mixReference byte for byte, for
// every float dtype and layout, both ops, and batches of 1 to 5.
func TestMixMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, dt := range []sample.DType{sample.F32, sample.F16, sample.BF16} {
		for _, lay := range []sample.Layout{sample.CHW, sample.HWC} {
			for _, spec := range []string{"mixup=0.4", "cutmix=1", "mixup=0.2,cutmix=1"} {
				ops, _ := ParseOps("crop=12:2,flip,normalize=cifar10,out=" + dt.String() + ":" + lay.String() + "," + spec)
				p, err := NewPipeline(Spec{H: 12, W: 9, C: 3, DType: sample.U8, Layout: sample.HWC}, ops...)
				if err != nil {
					t.Fatal(err)
				}
				m, s := p.Mixer(), p.Out()
				for n := 1; n <= 5; n++ {
					for b := range int64(6) {
						data := make([]byte, n*s.Bytes())
						for k := 0; k < len(data); k += s.DType.Size() {
							convert(data[k:], s.DType, float32(rng.NormFloat64()))
						}
						mx := m.Draw(7, 3, n, b)
						want := mixReference(data, n, s, mx)
						tmp := make([]byte, s.Bytes())
						if err := m.Apply(data, n, mx, tmp); err != nil {
							t.Fatal(err)
						}
						if !bytes.Equal(data, want) {
							t.Fatalf("%s %s %s n=%d mix %+v: Apply differs from the reference", dt, lay, spec, n, mx)
						}
					}
				}
			}
		}
	}
}

func TestMixApplyErrors(t *testing.T) {
	ops, _ := ParseOps("normalize=cifar10,mixup=1")
	p, err := NewPipeline(Spec{H: 4, W: 4, C: 3, DType: sample.U8, Layout: sample.CHW}, ops...)
	if err != nil {
		t.Fatal(err)
	}
	m, sz := p.Mixer(), p.Out().Bytes()
	data, tmp := make([]byte, 2*sz), make([]byte, sz)
	for _, tc := range []struct {
		n    int
		mx   sample.Mix
		data []byte
		tmp  []byte
		want error
	}{
		{2, sample.Mix{Kind: sample.MixUp, Lambda: 0.5}, data[:sz], tmp, ErrBufferSize},
		{2, sample.Mix{Kind: sample.MixUp, Lambda: 0.5}, data, tmp[:1], ErrBufferSize},
		{0, sample.Mix{Kind: sample.MixUp, Lambda: 0.5}, data, tmp, ErrBufferSize},
		{2, sample.Mix{Kind: sample.CutMix, Lambda: 0.5}, data, tmp, ErrParams}, // no cutmix declared
		{2, sample.Mix{Kind: sample.MixUp, Lambda: 1.5}, data, tmp, ErrParams},
		{2, sample.Mix{}, data, tmp, ErrParams},
	} {
		if err := m.Apply(tc.data, tc.n, tc.mx, tc.tmp); !errors.Is(err, tc.want) {
			t.Errorf("Apply(n=%d, %+v) = %v, want %v", tc.n, tc.mx, err, tc.want)
		}
	}
	if a := testing.AllocsPerRun(20, func() { _ = m.Apply(data, 2, m.Draw(1, 0, 0, 0), tmp) }); a != 0 {
		t.Errorf("Draw and Apply allocate %v times a batch", a)
	}
}

// TestBetaStatistics: the Beta(α, α) draws have mean 1/2 and variance
// 1/(4(2α+1)), stay in [0, 1], and each Gamma draw takes few tries.
func TestBetaStatistics(t *testing.T) {
	const n = 40000
	for _, alpha := range []float64{0.1, 0.2, 0.4, 1, 2, 5} {
		var sum, sq float64
		maxTries, tries := 0, 0
		for i := range uint64(n) {
			key := mixKey(42, 0, 0, int64(i))
			v := betaSym(key, alpha)
			if !(v >= 0 && v <= 1) {
				t.Fatalf("α=%v: draw %v outside [0, 1]", alpha, v)
			}
			sum += v
			sq += (v - 0.5) * (v - 0.5)
			_, k := logGamma(key, streamMixGammaX, alpha)
			tries += k
			maxTries = max(maxTries, k)
		}
		mean, variance := sum/n, sq/n
		wantVar := 1 / (4 * (2*alpha + 1))
		se := math.Sqrt(wantVar / n)
		if math.Abs(mean-0.5) > 5*se {
			t.Errorf("α=%v: mean %.4f, want 0.5 ± %.4f", alpha, mean, 5*se)
		}
		if math.Abs(variance-wantVar) > 0.05*wantVar {
			t.Errorf("α=%v: variance %.5f, want %.5f ± 5%%", alpha, variance, wantVar)
		}
		if avg := float64(tries) / n; avg > 1.1 || maxTries > 8 {
			t.Errorf("α=%v: Gamma draws took %.3f tries on average, at most %d", alpha, avg, maxTries)
		}
	}
	// Fixed keys give fixed draws: the generator is data.
	if a, b := betaSym(mixKey(1, 2, 3, 4), 0.2), betaSym(mixKey(1, 2, 3, 4), 0.2); a != b {
		t.Errorf("the same key drew %v and %v", a, b)
	}
}

// TestCutMixBox: the box lies in the image, λ is 1 - its area share, and
// an unclipped box has the area (1-λ₀)·H·W asks, to the rounding of its
// half-sides; a batch with both ops takes cutmix as often as Switch says.
func TestCutMixBox(t *testing.T) {
	const h, w = 24, 40
	ops, _ := ParseOps("normalize=cifar10,mixup=1,cutmix=1:0.3")
	p, err := NewPipeline(Spec{H: h, W: w, C: 3, DType: sample.U8, Layout: sample.CHW}, ops...)
	if err != nil {
		t.Fatal(err)
	}
	m := p.Mixer()
	cuts := 0
	const n = 20000
	for b := range int64(n) {
		mx := m.Draw(9, 1, 2, b)
		if mx != m.Draw(9, 1, 2, b) {
			t.Fatalf("batch %d: two draws differ", b)
		}
		if mx.Kind == sample.MixUp {
			if mx.Box != (sample.Box{}) || mx.Lambda != float64(float32(mx.Lambda)) {
				t.Fatalf("mixup %+v: want no box and a float32 λ", mx)
			}
			continue
		}
		cuts++
		bx := mx.Box
		if bx.X < 0 || bx.Y < 0 || bx.X+bx.W > w || bx.Y+bx.H > h {
			t.Fatalf("box %+v outside %dx%d", bx, w, h)
		}
		if want := 1 - float64(bx.W*bx.H)/(h*w); mx.Lambda != want {
			t.Fatalf("cutmix %+v: λ is not 1 - area share %v", mx, want)
		}
		// Redraw λ₀ to check the unclipped area.
		key := mixKey(9, 1, 2, b)
		lam0 := float64(float32(betaSym(key, 1)))
		rw, rh := int(0.5*math.Sqrt(1-lam0)*w), int(0.5*math.Sqrt(1-lam0)*h)
		if bx.W == int32(2*rw) && bx.H == int32(2*rh) {
			area, ideal := float64(bx.W*bx.H), (1-lam0)*h*w
			if area > ideal+1e-9 || area < ideal-2*(math.Sqrt(1-lam0)*(h+w))-4 {
				t.Fatalf("unclipped box %+v has area %v, λ₀ %v asks %v", bx, area, lam0, ideal)
			}
		}
	}
	if share, se := float64(cuts)/n, math.Sqrt(0.3*0.7/n); math.Abs(share-0.3) > 5*se {
		t.Errorf("cutmix took %.3f of the batches, want 0.3", share)
	}
	if a, b := m.Draw(9, 1, 0, 5), m.Draw(9, 1, 1, 5); a == b {
		t.Errorf("ranks 0 and 1 drew the same mix %+v", a)
	}
}
