package sample

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

// halfValues holds every non-negative binary16 value by bits 0x0000..0x7c00
// as float64 (0x7c00, +Inf, as 2^16: the value rounding overflows to).
var halfValues = func() []float64 {
	v := make([]float64, 0x7c01)
	for b := range v {
		e, m := b>>10, float64(b&0x3ff)
		switch {
		case e == 0:
			v[b] = m * 0x1p-24
		default:
			v[b] = (1 + m/1024) * math.Pow(2, float64(e-15))
		}
	}
	return v
}()

// refFloat16 rounds f to binary16 by search: the two neighbours of |f| in
// the table of all halves, the nearer one, ties to the even bit pattern.
func refFloat16(f float32) uint16 {
	x := float64(f)
	var sign uint16
	if math.Signbit(x) {
		sign, x = 0x8000, -x
	}
	switch {
	case math.IsNaN(x):
		return 0x7e00 | sign // quiet NaN
	case x >= 0x1p16:
		return sign | 0x7c00
	}
	hi := sort.SearchFloat64s(halfValues, x) // first value >= x
	if halfValues[hi] == x || hi == 0 {
		return sign | uint16(hi)
	}
	lo := hi - 1
	dl, dh := x-halfValues[lo], halfValues[hi]-x
	if dl < dh || dl == dh && lo%2 == 0 {
		return sign | uint16(lo)
	}
	return sign | uint16(hi)
}

// refBFloat16 rounds f to bfloat16 by comparing distances to the two
// truncations around it in float64, ties to even.
func refBFloat16(f float32) uint16 {
	b := math.Float32bits(f)
	if math.IsNaN(float64(f)) {
		return uint16(b>>16) | 0x40
	}
	if math.IsInf(float64(f), 0) {
		return uint16(b >> 16)
	}
	lo := b &^ 0xffff
	x := math.Abs(float64(f))
	vl := math.Abs(float64(math.Float32frombits(lo)))
	vh := vl + math.Pow(2, float64(int(lo>>23&0xff)-127-7)) // one bf16 ulp up
	if lo>>23&0xff == 0 {
		vh = vl + math.Pow(2, -126-7) // subnormal ulp
	}
	switch dl, dh := x-vl, vh-x; {
	case dl < dh, dl == dh && lo>>16&1 == 0:
		return uint16(lo >> 16)
	}
	return uint16(lo>>16) + 1 // carries into the exponent, up to Inf
}

func TestFloat16Edges(t *testing.T) {
	for _, tc := range []struct {
		f    float32
		want uint16
	}{
		{0, 0x0000},
		{float32(math.Copysign(0, -1)), 0x8000},
		{1, 0x3c00},
		{-2, 0xc000},
		{65504, 0x7bff},                            // largest half
		{65519.996, 0x7bff},                        // just below the midpoint
		{65520, 0x7c00},                            // midpoint ties to even: Inf
		{1e10, 0x7c00},                             // overflow
		{-1e10, 0xfc00},                            //
		{float32(math.Inf(1)), 0x7c00},             //
		{0x1p-14, 0x0400},                          // smallest normal
		{0x1p-24, 0x0001},                          // smallest subnormal
		{0x1p-25, 0x0000},                          // half of it: tie to even 0
		{0x1.8p-25, 0x0001},                        // above the tie
		{0x3p-25, 0x0002},                          // 1.5 ulp: tie to even 2
		{0x1p-26, 0x0000},                          //
		{0x1.ff8p-15, 0x03ff},                      // largest subnormal, 1023·2^-24
		{0x1.ffap-15, 0x03ff},                      // 1023.25·2^-24 rounds down
		{0x1.ffcp-15, 0x0400},                      // 1023.5·2^-24 ties to even: up into the normals
		{1 + 0x1p-11, 0x3c00},                      // tie to even (down)
		{1 + 0x3p-11, 0x3c02},                      // tie to even (up)
		{1 + 0x1p-11 + 0x1p-20, 0x3c01},            // above the tie
		{float32(1) / 3, 0x3555},                   //
		{float32(math.NaN()), 0x7e00},              //
		{math.Float32frombits(0x7f800001), 0x7e00}, // signalling NaN turns quiet
		{math.Float32frombits(0xffc00000), 0xfe00}, // negative NaN
		{math.Float32frombits(0x00000001), 0x0000}, // float32 subnormal
	} {
		if got := Float16(tc.f); got != tc.want {
			t.Errorf("Float16(%g) = %#04x, want %#04x", tc.f, got, tc.want)
		}
		if got := refFloat16(tc.f); got != tc.want && !math.IsNaN(float64(tc.f)) {
			t.Errorf("refFloat16(%g) = %#04x, want %#04x (the test's reference is wrong)", tc.f, got, tc.want)
		}
	}
}

// TestFloat16Sweep compares Float16 with the search reference over every
// half's neighbourhood (each value, its midpoints and a float32 ulp either
// side) and a deterministic spread of float32 bit patterns.
func TestFloat16Sweep(t *testing.T) {
	check := func(f float32) {
		if got, want := Float16(f), refFloat16(f); got != want && !math.IsNaN(float64(f)) {
			t.Fatalf("Float16(%g = %#08x) = %#04x, want %#04x", f, math.Float32bits(f), got, want)
		}
	}
	for i := 0; i+1 < len(halfValues); i++ {
		for _, x := range []float64{halfValues[i], (halfValues[i] + halfValues[i+1]) / 2} {
			f := float32(x)
			for _, g := range []float32{f, math.Nextafter32(f, 0), math.Nextafter32(f, 1e9)} {
				check(g)
				check(-g)
			}
		}
	}
	for b := uint32(0); b < 1<<32-1<<14; b += 1<<14 - 3 {
		check(math.Float32frombits(b))
	}
}

func TestBFloat16(t *testing.T) {
	for _, tc := range []struct {
		f    float32
		want uint16
	}{
		{1, 0x3f80},
		{-1, 0xbf80},
		{1 + 0x1p-8, 0x3f80},            // tie to even (down)
		{1 + 0x3p-8, 0x3f82},            // tie to even (up)
		{1 + 0x1p-8 + 0x1p-20, 0x3f81},  // above the tie
		{math.MaxFloat32, 0x7f80},       // rounds up to Inf
		{float32(math.Inf(-1)), 0xff80}, //
		{math.Float32frombits(0x7f7f7fff), 0x7f7f},
		{math.Float32frombits(0x00000001), 0x0000}, // subnormal, tie-free
		{math.Float32frombits(0x00008000), 0x0000}, // subnormal tie to even
		{math.Float32frombits(0x00018000), 0x0002}, // subnormal tie to even (up)
		{float32(math.NaN()), 0x7fc0},
		{math.Float32frombits(0x7f800001), 0x7fc0}, // signalling NaN turns quiet
	} {
		if got := BFloat16(tc.f); got != tc.want {
			t.Errorf("BFloat16(%g) = %#04x, want %#04x", tc.f, got, tc.want)
		}
	}
	r := rand.New(rand.NewPCG(5, 6))
	for range 1 << 20 {
		f := math.Float32frombits(r.Uint32())
		if got, want := BFloat16(f), refBFloat16(f); got != want {
			t.Fatalf("BFloat16(%g = %#08x) = %#04x, want %#04x", f, math.Float32bits(f), got, want)
		}
	}
}
