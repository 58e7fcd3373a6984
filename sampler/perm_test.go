package sampler

import (
	"math"
	"testing"
)

var testKeys = []uint64{0, 1, 0xdeadbeef, EpochKey(42, 7)}

// checkBijection evaluates the whole permutation and fails unless it hits
// every value of [0, n) once and Inverse undoes At.
func checkBijection(t *testing.T, n int64, key uint64) {
	t.Helper()
	p := NewPerm(n, key)
	seen := make([]uint64, (n+63)/64)
	for i := range n {
		j := p.At(i)
		if j < 0 || j >= n {
			t.Fatalf("n=%d key=%#x: At(%d)=%d out of range", n, key, i, j)
		}
		if seen[j/64]&(1<<(j%64)) != 0 {
			t.Fatalf("n=%d key=%#x: value %d hit twice", n, key, j)
		}
		seen[j/64] |= 1 << (j % 64)
		if back := p.Inverse(j); back != i {
			t.Fatalf("n=%d key=%#x: Inverse(At(%d))=%d", n, key, i, back)
		}
	}
}

func TestPermBijectionSmall(t *testing.T) {
	for n := int64(1); n <= 300; n++ {
		for _, k := range testKeys {
			checkBijection(t, n, k)
		}
	}
}

func TestPermBijectionLarge(t *testing.T) {
	// 1<<20+1 has the widest Feistel domain relative to n (~4n).
	for _, n := range []int64{1<<20 + 1, 1_000_003} {
		checkBijection(t, n, 99)
	}
}

func TestPermSampledHuge(t *testing.T) {
	for _, n := range []int64{1e9, 1<<40 + 1, 3<<40 - 7, MaxN, math.MaxInt64} {
		p := NewPerm(n, 5)
		seen := map[int64]bool{}
		for s := range int64(2000) {
			i := int64(mix64(uint64(s)) % uint64(n))
			if s < 10 {
				i = n - 1 - s // the top of the domain
			}
			j := p.At(i)
			if j < 0 || j >= n {
				t.Fatalf("n=%d: At(%d)=%d out of range", n, i, j)
			}
			if p.Inverse(j) != i || p.At(p.Inverse(i)) != i {
				t.Fatalf("n=%d: At and Inverse disagree at %d", n, i)
			}
			seen[j] = true
		}
		if len(seen) < 1990 { // sampled i may repeat, but hardly ever
			t.Errorf("n=%d: only %d distinct images of 2000 samples", n, len(seen))
		}
	}
}

func TestPermOutOfRange(t *testing.T) {
	cases := []struct {
		name string
		p    Perm
		i    int64
	}{
		{"zero", Perm{}, 0},
		{"negative n", NewPerm(-3, 1), 0},
		{"below", NewPerm(10, 1), -1},
		{"at n", NewPerm(10, 1), 10},
		{"above domain", NewPerm(10, 1), 1 << 40},
	}
	for _, c := range cases {
		if got := c.p.At(c.i); got != -1 {
			t.Errorf("%s: At(%d)=%d, want -1", c.name, c.i, got)
		}
		if got := c.p.Inverse(c.i); got != -1 {
			t.Errorf("%s: Inverse(%d)=%d, want -1", c.name, c.i, got)
		}
	}
}

func order(p Perm) []int64 {
	o := make([]int64, p.Len())
	for i := range o {
		o[i] = p.At(int64(i))
	}
	return o
}

func TestPermKeys(t *testing.T) {
	const n = 200
	a, b := order(NewPerm(n, EpochKey(1, 3))), order(NewPerm(n, EpochKey(1, 3)))
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same key, different orders at %d", i)
		}
	}
	// Every pair of epochs (and a second seed) must give unrelated orders:
	// a random pair shares about one position.
	var orders [][]int64
	for e := range int64(8) {
		orders = append(orders, order(NewPerm(n, EpochKey(1, e))))
	}
	orders = append(orders, order(NewPerm(n, EpochKey(2, 0))))
	for x := range orders {
		for y := x + 1; y < len(orders); y++ {
			same := 0
			for i := range n {
				if orders[x][i] == orders[y][i] {
					same++
				}
			}
			if same > 10 {
				t.Errorf("orders %d and %d agree at %d of %d positions", x, y, same, n)
			}
		}
	}
	// Not the identity, nor close to it.
	fixed := 0
	for i, v := range orders[0] {
		if int64(i) == v {
			fixed++
		}
	}
	if fixed > 10 {
		t.Errorf("%d fixed points of %d", fixed, n)
	}
}

func TestEpochKeyDistinct(t *testing.T) {
	seen := map[uint64]bool{}
	for _, s := range []uint64{0, 1, 2, math.MaxUint64} {
		for e := int64(-3); e < 500; e++ {
			k := EpochKey(s, e)
			if seen[k] {
				t.Fatalf("EpochKey(%d, %d) repeats a key", s, e)
			}
			seen[k] = true
		}
	}
}

// chiSquare returns Pearson's statistic of counts against a uniform law.
func chiSquare(counts []int, total int) float64 {
	exp := float64(total) / float64(len(counts))
	var x float64
	for _, c := range counts {
		d := float64(c) - exp
		x += d * d / exp
	}
	return x
}

// TestPermUniform checks, over many fixed keys, where element 0 lands and
// which element lands at position 0. The bound is loose (about 8σ above the
// mean) and the keys fixed, so it cannot flake; a biased or key-blind
// permutation exceeds it by orders of magnitude.
func TestPermUniform(t *testing.T) {
	for _, n := range []int64{2, 3, 5, 10, 37, 100, 1000} {
		const perBin = 200
		keys := int(n) * perBin
		pos0, at0 := make([]int, n), make([]int, n)
		for k := range keys {
			p := NewPerm(n, EpochKey(7, int64(k)))
			pos0[p.Inverse(0)]++
			at0[p.At(0)]++
		}
		df := float64(n - 1)
		limit := df + 8*math.Sqrt(2*df) + 8
		for name, c := range map[string][]int{"position of 0": pos0, "value at 0": at0} {
			if x := chiSquare(c, keys); x > limit {
				t.Errorf("n=%d %s: chi-square %.1f > %.1f (df %.0f)", n, name, x, limit, df)
			}
		}
	}
}
