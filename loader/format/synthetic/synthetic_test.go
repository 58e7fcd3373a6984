package synthetic

import (
	"bytes"
	"errors"
	"testing"

	"github.com/loaderd/loaderd/loader"
)

func TestSynthetic(t *testing.T) {
	src, err := loader.Open("synthetic:1000")
	if err != nil {
		t.Fatal(err)
	}
	a, b := make([]byte, 3072), make([]byte, 3072)
	counts := make([]int, 10)
	for i := int64(0); i < src.Len(); i++ {
		la, pa, err := src.Sample(i, a)
		if err != nil {
			t.Fatal(err)
		}
		lb, pb, _ := src.Sample(i, b)
		if la != lb || !bytes.Equal(pa, pb) {
			t.Fatalf("sample %d is not deterministic", i)
		}
		counts[la]++
	}
	for c, n := range counts {
		if n < 60 || n > 140 {
			t.Fatalf("class %d has %d of 1000 samples; labels are not spread", c, n)
		}
	}
	if _, _, err := src.Sample(1000, a); !errors.Is(err, loader.ErrIndex) {
		t.Fatalf("Sample(1000) = %v, want ErrIndex", err)
	}
}

// TestSyntheticLearnable checks the classes differ in a way a model can
// pick up: a nearest-class-mean classifier on mean colour is far above
// chance on held-out samples.
func TestSyntheticLearnable(t *testing.T) {
	src := New(2000, 0)
	buf := make([]byte, 3072)
	meanColour := func(i int64) (int32, [3]float64) {
		label, pix, _ := src.Sample(i, buf)
		var m [3]float64
		for k, v := range pix {
			m[k%3] += float64(v) / 1024
		}
		return label, m
	}
	var centre [10][3]float64
	var count [10]float64
	for i := int64(0); i < 1000; i++ {
		l, m := meanColour(i)
		for c := range m {
			centre[l][c] += m[c]
		}
		count[l]++
	}
	correct := 0
	for i := int64(1000); i < 2000; i++ {
		l, m := meanColour(i)
		best, bestD := -1, 0.0
		for k := range centre {
			d := 0.0
			for c := range m {
				x := m[c] - centre[k][c]/count[k]
				d += x * x
			}
			if best < 0 || d < bestD {
				best, bestD = k, d
			}
		}
		if int32(best) == l {
			correct++
		}
	}
	if correct < 800 {
		t.Fatalf("nearest-mean accuracy %d/1000: classes are not separable", correct)
	}
}

// TestSyntheticSpec checks the spec's forms: ?seed=S opens New(N, S), which
// differs from seed 0, and bad specs are refused with the reason.
func TestSyntheticSpec(t *testing.T) {
	sample := func(src loader.Source, i int64) []byte {
		_, p, err := src.Sample(i, make([]byte, 3072))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	seeded, err := loader.Open("synthetic:64?seed=3")
	if err != nil {
		t.Fatal(err)
	}
	if seeded.Len() != 64 || seeded.(interface{ String() string }).String() != "synthetic:64?seed=3" {
		t.Fatalf("synthetic:64?seed=3 opened %v with %d samples", seeded, seeded.Len())
	}
	plain, err := loader.Open("synthetic:64")
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(64) {
		if !bytes.Equal(sample(seeded, i), sample(New(64, 3), i)) {
			t.Fatalf("sample %d of synthetic:64?seed=3 differs from New(64, 3)", i)
		}
	}
	if bytes.Equal(sample(seeded, 0), sample(plain, 0)) {
		t.Fatal("seed 3 gives seed 0's sample 0")
	}
	for _, spec := range []string{"synthetic:0", "synthetic:x", "synthetic:8?seed=-1", "synthetic:8?size=4", "synthetic:8?seed=1&seed=2"} {
		if _, err := loader.Open(spec); err == nil {
			t.Errorf("%s opened, want an error", spec)
		}
	}
}
