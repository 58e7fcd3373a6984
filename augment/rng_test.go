package augment

import (
	"math"
	"math/bits"
	"sync"
	"testing"

	"github.com/loaderd/loaderd/client/sample"
)

func cifarPipeline(t testing.TB) *Pipeline {
	t.Helper()
	p, err := NewPipeline(Spec{H: 32, W: 32, C: 3, DType: sample.U8, Layout: sample.CHW}, CIFARTrain(sample.F32, sample.CHW)...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDrawDeterministic(t *testing.T) {
	p := cifarPipeline(t)
	q := cifarPipeline(t) // a second pipeline: no state is shared or kept
	want := make([]sample.Params, 1000)
	for i := range want {
		want[i] = p.Draw(42, 3, int64(i))
	}
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range want { // each goroutine walks its own order
				i := (k*7 + g*13) % len(want)
				if got := q.Draw(42, 3, int64(i)); got != want[i] {
					errs <- "mismatch"
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}

// TestDrawKeys: changing any one of seed, epoch or index changes the
// params of most samples, and the key itself always.
func TestDrawKeys(t *testing.T) {
	p := cifarPipeline(t)
	const n = 1000
	for _, tc := range []struct {
		name   string
		a, b   func(i int64) sample.Params
		ka, kb func(i int64) uint64
	}{
		{"seed", func(i int64) sample.Params { return p.Draw(1, 0, i) }, func(i int64) sample.Params { return p.Draw(2, 0, i) },
			func(i int64) uint64 { return drawKey(1, 0, i) }, func(i int64) uint64 { return drawKey(2, 0, i) }},
		{"epoch", func(i int64) sample.Params { return p.Draw(1, 0, i) }, func(i int64) sample.Params { return p.Draw(1, 1, i) },
			func(i int64) uint64 { return drawKey(1, 0, i) }, func(i int64) uint64 { return drawKey(1, 1, i) }},
		{"index", func(i int64) sample.Params { return p.Draw(1, 0, i) }, func(i int64) sample.Params { return p.Draw(1, 0, i+1) },
			func(i int64) uint64 { return drawKey(1, 0, i) }, func(i int64) uint64 { return drawKey(1, 0, i+1) }},
		{"index vs epoch", func(i int64) sample.Params { return p.Draw(1, 1, i) }, func(i int64) sample.Params { return p.Draw(1, i, 1) },
			func(i int64) uint64 { return drawKey(1, 1, i) }, func(i int64) uint64 { return drawKey(1, i, 1) }},
	} {
		same := 0
		for i := int64(2); i < n+2; i++ {
			if tc.ka(i) == tc.kb(i) {
				t.Errorf("%s: same key at %d", tc.name, i)
			}
			if tc.a(i) == tc.b(i) {
				same++
			}
		}
		// Two independent draws agree with probability 1/81 · 1/2.
		if same > n/50 {
			t.Errorf("%s: %d of %d params unchanged", tc.name, same, n)
		}
	}
}

// TestDrawDistribution: over 100k indices Top and Left are uniform over
// [0, 8] and the flip rate is 1/2. The inputs are fixed, so this cannot
// flake; the bounds are about 4 standard deviations.
func TestDrawDistribution(t *testing.T) {
	p := cifarPipeline(t)
	const n = 100000
	var top, left [9]int
	flips := 0
	for i := range int64(n) {
		prm := p.Draw(2024, 5, i)
		if prm.Top < 0 || prm.Top > 8 || prm.Left < 0 || prm.Left > 8 {
			t.Fatalf("index %d: %+v out of range", i, prm)
		}
		top[prm.Top]++
		left[prm.Left]++
		if prm.Flip {
			flips++
		}
	}
	sd := math.Sqrt(n * (1.0 / 9) * (8.0 / 9))
	for k := range 9 {
		for name, c := range map[string]int{"top": top[k], "left": left[k]} {
			if math.Abs(float64(c)-n/9.0) > 4*sd {
				t.Errorf("%s=%d drawn %d times, want about %d", name, k, c, n/9)
			}
		}
	}
	if math.Abs(float64(flips)-n/2) > 4*math.Sqrt(n/4.0) {
		t.Errorf("%d flips of %d, want about half", flips, n)
	}
}

// TestUniformUnbiased uses n = 3·2^62, where multiply-shift without
// rejection maps two 64-bit values to every third result, so results ≡ 0
// (mod 3) would take half the mass instead of a third.
func TestUniformUnbiased(t *testing.T) {
	n := uint64(3) << 62
	t0 := -n % n // 2^64 mod n
	const draws = 30000
	zero, rejected := 0, 0
	for i := range uint64(draws) {
		key := drawKey(9, 0, int64(i))
		v := uniform(key, 0, n)
		if v >= n {
			t.Fatalf("uniform = %d, want < %d", v, n)
		}
		if v%3 == 0 {
			zero++
		}
		if _, lo := bits.Mul64(rand64(key, 0, 0), n); lo < t0 {
			rejected++
		}
	}
	if f := float64(zero) / draws; math.Abs(f-1.0/3) > 0.015 {
		t.Errorf("%.3f of results ≡ 0 mod 3, want 1/3", f)
	}
	// 2^64 mod n = 2^62: a quarter of first draws are rejected.
	if f := float64(rejected) / draws; math.Abs(f-0.25) > 0.015 {
		t.Errorf("%.3f of first draws rejected, want 1/4", f)
	}
	// Small ranges: every value of [0, 9) and nothing else.
	seen := map[uint64]bool{}
	for i := range int64(1000) {
		seen[uniform(drawKey(1, 2, i), streamTop, 9)] = true
	}
	if len(seen) != 9 {
		t.Errorf("uniform over 9 gave %d distinct values", len(seen))
	}
	if v := uniform(drawKey(1, 2, 3), streamTop, 1); v != 0 {
		t.Errorf("uniform over 1 = %d", v)
	}
}

func TestDrawWithoutOps(t *testing.T) {
	in := Spec{H: 8, W: 8, C: 1, DType: sample.U8, Layout: sample.HWC}
	p, err := NewPipeline(in, ToTensor{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(100) {
		if prm := p.Draw(1, 1, i); prm != (sample.Params{}) {
			t.Fatalf("no crop, no flip: got %+v", prm)
		}
	}
	p, err = NewPipeline(in, RandomHorizontalFlip{P: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(100) {
		if prm := p.Draw(1, 1, i); prm != (sample.Params{Flip: true}) {
			t.Fatalf("flip p=1 and no crop: got %+v", prm)
		}
	}
}
