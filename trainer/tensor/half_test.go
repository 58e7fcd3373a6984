package tensor

import (
	"errors"
	"math"
	"testing"

	"github.com/loaderd/loaderd/trainer/amp"
)

// halfPatterns are float32 bit patterns that reach every branch of the
// rounding: a stride over all 2³² patterns, and each boundary's
// neighbourhood (half-way points, fp16's overflow and subnormal edges).
func halfPatterns() []uint32 {
	var p []uint32
	for b := uint64(0); b < 1<<32; b += 65521 {
		p = append(p, uint32(b))
	}
	for _, c := range []uint32{0, 0x00008000, 0x3f808000, 0x3f818000, 0x3f801000, 0x3f803000,
		0x477fe000, 0x477fefff, 0x477ff000, 0x477ff001, 0x47800000, 0x38800000, 0x387fffff,
		0x33000000, 0x33000001, 0x32ffffff, 0x33800000, 0x7f7fffff, 0x7f800000, 0x7f800001, 0x7fc00000, 0x7fffffff} {
		for d := uint32(0); d < 5; d++ {
			p = append(p, c+d, c-d, c+d|0x80000000, (c-d)|0x80000000)
		}
	}
	return p
}

// RoundBF16 and RoundFP16 equal amp.Round (a conversion to the 16-bit
// format and back through augment's converters) bit for bit.
func TestRoundMatchesConversion(t *testing.T) {
	pats := halfPatterns()
	for _, tc := range []struct {
		mode amp.Mode
		f    func(uint32) uint32
	}{{amp.BF16, RoundBF16}, {amp.FP16, RoundFP16}} {
		want := make([]float32, len(pats))
		for i, b := range pats {
			want[i] = math.Float32frombits(b)
		}
		amp.Round(want, tc.mode)
		for i, b := range pats {
			if got, w := tc.f(b), math.Float32bits(want[i]); got != w {
				t.Fatalf("%v: %#08x rounds to %#08x, conversion gives %#08x", tc.mode, b, got, w)
			}
		}
	}
}

// Device.Round runs the same rounding over a buffer split among workers,
// leaves f32 alone, and rejects an unknown precision.
func TestDeviceRound(t *testing.T) {
	d := newCPU(t, 3)
	pats := halfPatterns()
	src := make([]float32, len(pats))
	for i, b := range pats {
		src[i] = math.Float32frombits(b)
	}
	for _, p := range []Precision{F32Exact, BF16, FP16} {
		x := upload(t, d, src)
		d.Round(x, p)
		got := make([]float32, len(src))
		if err := d.CopyOut(got, x); err != nil {
			t.Fatal(err)
		}
		for i, b := range pats {
			want := b
			switch p {
			case BF16:
				want = RoundBF16(b)
			case FP16:
				want = RoundFP16(b)
			}
			if math.Float32bits(got[i]) != want {
				t.Fatalf("%v: element %d (%#08x) = %#08x, want %#08x", p, i, b, math.Float32bits(got[i]), want)
			}
		}
	}
	d.Round(upload(t, d, src[:4]), FP16+1)
	if err := d.Sync(); !errors.Is(err, ErrArg) {
		t.Fatalf("unknown precision: %v, want ErrArg", err)
	}
}

func TestNonFinite(t *testing.T) {
	d := newCPU(t, 2)
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	for _, tc := range []struct {
		name string
		x    []float32
		want float32
	}{
		{"finite", []float32{0, -1, 65504, math.MaxFloat32, -math.MaxFloat32, 1e-45}, 0},
		{"+inf last", []float32{1, 2, 3, inf}, 1},
		{"-inf first", []float32{-inf, 2, 3}, 1},
		{"nan", []float32{1, nan, 3}, 1},
		{"one", []float32{7}, 0},
	} {
		flag := upload(t, d, []float32{42})
		d.NonFinite(flag, upload(t, d, tc.x))
		got := []float32{-1}
		if err := d.CopyOut(got, flag); err != nil {
			t.Fatal(err)
		}
		if got[0] != tc.want {
			t.Errorf("%s: NonFinite = %v, want %v", tc.name, got[0], tc.want)
		}
	}
	d.NonFinite(upload(t, d, []float32{0, 0}), upload(t, d, []float32{1}))
	if err := d.Sync(); !errors.Is(err, ErrArg) {
		t.Fatalf("two-element flag: %v, want ErrArg", err)
	}
}
