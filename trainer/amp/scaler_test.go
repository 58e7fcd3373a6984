package amp

import (
	"math"
	"testing"
)

// The state machine against PyTorch's documented behaviour
// (torch.amp.GradScaler, _amp_update_scale_): each row is a sequence of
// steps (true: gradients held Inf/NaN) and the scale and tracker after it.
func TestGradScalerUpdate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		scaler  GradScaler
		steps   []bool
		scale   float32
		tracker int
	}{
		{"defaults untouched", *NewGradScaler(), nil, 65536, 0},
		{"one clean step counts", *NewGradScaler(), []bool{false}, 65536, 1},
		{"inf halves and resets", *NewGradScaler(), []bool{false, false, true}, 32768, 0},
		{"two infs in a row", *NewGradScaler(), []bool{true, true}, 16384, 0},
		{"growth after the interval", GradScaler{Scale: 8, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 3},
			[]bool{false, false, false}, 16, 0},
		{"not before it", GradScaler{Scale: 8, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 3},
			[]bool{false, false}, 8, 2},
		{"an inf restarts the count", GradScaler{Scale: 8, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 3},
			[]bool{false, false, true, false, false, false}, 8, 0},
		{"grows again after another interval", GradScaler{Scale: 8, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 2},
			[]bool{false, false, false, false, false}, 32, 1},
		{"never grows to inf", GradScaler{Scale: math.MaxFloat32, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 1},
			[]bool{false}, math.MaxFloat32, 0},
		{"backs off below 1", GradScaler{Scale: 1, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 2000},
			[]bool{true, true, true}, 0.125, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.scaler
			for _, found := range tc.steps {
				s.Update(found)
			}
			if s.Scale != tc.scale || s.Tracker() != tc.tracker {
				t.Errorf("scale %v tracker %d, want %v %d", s.Scale, s.Tracker(), tc.scale, tc.tracker)
			}
		})
	}
}

// 2000 clean steps double the default scale; 1999 do not.
func TestGradScalerDefaultInterval(t *testing.T) {
	s := NewGradScaler()
	for range 1999 {
		s.Update(false)
	}
	if s.Scale != 65536 {
		t.Fatalf("grew early: %v", s.Scale)
	}
	s.Update(false)
	if s.Scale != 131072 || s.Tracker() != 0 {
		t.Fatalf("after 2000 clean steps: scale %v tracker %d", s.Scale, s.Tracker())
	}
}

func TestUnscale(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    []float32
		want  []float32
		found bool
	}{
		{"finite", []float32{65536, -32768, 1}, []float32{1, -0.5, 1.0 / 65536}, false},
		{"inf", []float32{1, float32(math.Inf(-1))}, []float32{1.0 / 65536, float32(math.Inf(-1))}, true},
		{"nan", []float32{float32(math.NaN()), 2}, nil, true},
		{"overflowed fp16 product", []float32{math.MaxFloat32, 0}, []float32{math.MaxFloat32 / 65536, 0}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := append([]float32(nil), tc.in...)
			if found := NewGradScaler().Unscale(g); found != tc.found {
				t.Errorf("found inf %v, want %v", found, tc.found)
			}
			for i := range tc.want {
				if g[i] != tc.want[i] {
					t.Errorf("grad %d: %v, want %v", i, g[i], tc.want[i])
				}
			}
		})
	}
}

func TestRound(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode Mode
		in   float32
		want float32
	}{
		{"bf16 exact", BF16, 1.5, 1.5},
		{"bf16 tie to even down", BF16, math.Float32frombits(0x3f808000), 1}, // 1 + 2⁻⁸: halfway, even is 1
		{"bf16 tie to even up", BF16, math.Float32frombits(0x3f818000), math.Float32frombits(0x3f820000)},
		{"bf16 keeps f32 range", BF16, 1e38, math.Float32frombits(0x7e960000)}, // 0x7e967699: low half below the midpoint,
		{"fp16 exact", FP16, -2.5, -2.5},
		{"fp16 tenth", FP16, 0.1, 0.0999755859375},
		{"fp16 largest", FP16, 65519, 65504},
		{"fp16 overflow", FP16, 65520, float32(math.Inf(1))},
		{"fp16 subnormal", FP16, 1e-7, 1.1920928955078125e-07}, // 2 · 2⁻²⁴
		{"fp16 underflow", FP16, 1e-8, 0},
		{"off", Off, 0.1, 0.1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := []float32{tc.in}
			Round(x, tc.mode)
			if x[0] != tc.want {
				t.Errorf("Round(%v, %v) = %v (%#x), want %v (%#x)", tc.in, tc.mode, x[0], math.Float32bits(x[0]),
					tc.want, math.Float32bits(tc.want))
			}
		})
	}
	x := []float32{float32(math.NaN())}
	Round(x, FP16)
	if x[0] == x[0] {
		t.Error("NaN did not stay NaN")
	}
}

// Float16To32 is exact: every finite half survives a round trip.
func TestFloat16RoundTrip(t *testing.T) {
	for h := range 1 << 16 {
		f := Float16To32(uint16(h))
		if f != f {
			continue
		}
		x := []float32{f}
		Round(x, FP16)
		if math.Float32bits(x[0]) != math.Float32bits(f) {
			t.Fatalf("half %#04x = %v rounds to %v", h, f, x[0])
		}
	}
}

func TestParseMode(t *testing.T) {
	for s, want := range map[string]Mode{"": Off, "bf16": BF16, "fp16": FP16, "half": FP16} {
		if m, err := ParseMode(s); err != nil || m != want {
			t.Errorf("ParseMode(%q) = %v, %v", s, m, err)
		}
	}
	if _, err := ParseMode("fp8"); err == nil {
		t.Error("fp8 accepted")
	}
}
