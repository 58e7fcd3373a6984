package sampler

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	all := []error{ErrEmptyDataset, ErrSize, ErrWorld, ErrRank}
	cases := []struct {
		name string
		d    Distributed
		want []error
	}{
		{"ok", Distributed{N: 10, Rank: 3, World: 4}, nil},
		{"drop last, N < world", Distributed{N: 3, Rank: 7, World: 8, DropLast: true}, nil},
		{"max N", Distributed{N: MaxN, World: 1}, nil},
		{"empty", Distributed{N: 0, World: 1}, []error{ErrEmptyDataset}},
		{"negative N", Distributed{N: -1, World: 1}, []error{ErrSize}},
		{"N too large", Distributed{N: MaxN + 1, World: 1}, []error{ErrSize}},
		{"world 0", Distributed{N: 5}, []error{ErrWorld}},
		{"rank = world", Distributed{N: 5, Rank: 2, World: 2}, []error{ErrRank}},
		{"negative rank", Distributed{N: 5, Rank: -1, World: 2}, []error{ErrRank}},
		{"everything", Distributed{N: -5, Rank: -1, World: -2}, []error{ErrSize, ErrWorld, ErrRank}},
		{"empty and bad rank", Distributed{N: 0, Rank: 4, World: 4}, []error{ErrEmptyDataset, ErrRank}},
	}
	for _, c := range cases {
		err := c.d.Validate()
		if (err == nil) != (c.want == nil) {
			t.Errorf("%s: Validate() = %v, want errors %v", c.name, err, c.want)
			continue
		}
		for _, e := range all {
			if got, want := errors.Is(err, e), slices.Contains(c.want, e); got != want {
				t.Errorf("%s: errors.Is(%v, %v) = %t, want %t", c.name, err, e, got, want)
			}
		}
		if err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "sampler: ") {
					t.Errorf("%s: %q lacks the package prefix", c.name, line)
				}
			}
		}
	}
}

func TestSizes(t *testing.T) {
	cases := []struct {
		n                                     int64
		world                                 int
		drop                                  bool
		samples, total, padding, droppedCount int64
	}{
		{10, 4, false, 3, 12, 2, 0},
		{10, 4, true, 2, 8, 0, 2},
		{12, 4, true, 3, 12, 0, 0},
		{12, 4, false, 3, 12, 0, 0},
		{3, 8, false, 1, 8, 5, 0},
		{3, 8, true, 0, 0, 0, 3},
		{1, 1, false, 1, 1, 0, 0},
		{1, 1, true, 1, 1, 0, 0},
		{7, 3, true, 2, 6, 0, 1},
		{1e9, 7, false, 142857143, 1000000001, 1, 0},
		{MaxN, 3, false, MaxN/3 + 1, MaxN + 2, 2, 0},
	}
	for _, c := range cases {
		d := Distributed{N: c.n, World: c.world, DropLast: c.drop}
		if d.NumSamples() != c.samples || d.TotalSize() != c.total ||
			d.Padding() != c.padding || d.Dropped() != c.droppedCount {
			t.Errorf("%+v: samples/total/padding/dropped = %d/%d/%d/%d, want %d/%d/%d/%d", d,
				d.NumSamples(), d.TotalSize(), d.Padding(), d.Dropped(),
				c.samples, c.total, c.padding, c.droppedCount)
		}
	}
}

// ranks returns every rank's indices of epoch e, read with At.
func ranks(d Distributed, e int64) [][]int64 {
	out := make([][]int64, d.World)
	for r := range out {
		d.Rank = r
		ep := d.Epoch(e)
		for p := range ep.Len() {
			out[r] = append(out[r], ep.At(p))
		}
	}
	return out
}

// TestHandVectors pins torch's DistributedSampler output for shuffle=False,
// worked out by hand from its list code (and checked in Python).
func TestHandVectors(t *testing.T) {
	cases := []struct {
		n     int64
		world int
		drop  bool
		want  [][]int64
	}{
		{10, 4, false, [][]int64{{0, 4, 8}, {1, 5, 9}, {2, 6, 0}, {3, 7, 1}}},
		{10, 4, true, [][]int64{{0, 4}, {1, 5}, {2, 6}, {3, 7}}},
		{3, 8, false, [][]int64{{0}, {1}, {2}, {0}, {1}, {2}, {0}, {1}}},
		{3, 8, true, [][]int64{nil, nil, nil, nil, nil, nil, nil, nil}},
		{2, 5, false, [][]int64{{0}, {1}, {0}, {1}, {0}}},
		{7, 3, false, [][]int64{{0, 3, 6}, {1, 4, 0}, {2, 5, 1}}},
		{7, 3, true, [][]int64{{0, 3}, {1, 4}, {2, 5}}},
		{1, 1, false, [][]int64{{0}}},
	}
	for _, c := range cases {
		d := Distributed{N: c.n, World: c.world, DropLast: c.drop, Seed: 99}
		for _, e := range []int64{0, 5} {
			if got := ranks(d, e); !slices.EqualFunc(got, c.want, slices.Equal) {
				t.Errorf("N=%d world=%d drop=%t epoch %d: got %v, want %v", c.n, c.world, c.drop, e, got, c.want)
			}
		}
	}
}

// torchRef is a literal port of DistributedSampler's list code, applied to
// a materialised epoch order.
func torchRef(indices []int64, world, rank int, dropLast bool) []int64 {
	n := len(indices)
	var numSamples int
	if dropLast && n%world != 0 {
		numSamples = int(math.Ceil(float64(n-world) / float64(world)))
	} else {
		numSamples = int(math.Ceil(float64(n) / float64(world)))
	}
	total := numSamples * world
	indices = slices.Clone(indices)
	if !dropLast {
		padding := total - len(indices)
		if padding <= len(indices) {
			indices = append(indices, indices[:padding]...)
		} else {
			reps := int(math.Ceil(float64(padding) / float64(len(indices))))
			indices = append(indices, slices.Repeat(indices, reps)[:padding]...)
		}
	} else {
		indices = indices[:total]
	}
	var out []int64
	for i := rank; i < total; i += world {
		out = append(out, indices[i])
	}
	return out
}

// epochOrder materialises the order the ranks of epoch e share.
func epochOrder(d Distributed, e int64) []int64 {
	if !d.Shuffle {
		o := make([]int64, d.N)
		for i := range o {
			o[i] = int64(i)
		}
		return o
	}
	return order(NewPerm(d.N, EpochKey(d.Seed, e)))
}

var (
	propNs     = []int64{1, 2, 3, 4, 5, 7, 8, 10, 16, 17, 31, 64, 100, 257}
	propWorlds = []int{1, 2, 3, 4, 5, 7, 8, 16, 33}
)

// forConfigs runs f over every dataset size, world, drop and shuffle choice.
func forConfigs(f func(d Distributed)) {
	for _, n := range propNs {
		for _, w := range propWorlds {
			for _, drop := range []bool{false, true} {
				for _, shuf := range []bool{false, true} {
					f(Distributed{N: n, World: w, Seed: 11, DropLast: drop, Shuffle: shuf})
				}
			}
		}
	}
}

func TestMatchesTorchReference(t *testing.T) {
	forConfigs(func(d Distributed) {
		for e := range int64(3) {
			ord := epochOrder(d, e)
			for r := range d.World {
				d.Rank = r
				ep := d.Epoch(e)
				want := torchRef(ord, d.World, r, d.DropLast)
				if ep.Len() != int64(len(want)) {
					t.Fatalf("%+v epoch %d: Len %d, torch %d", d, e, ep.Len(), len(want))
				}
				for p, w := range want {
					if got := ep.At(int64(p)); got != w {
						t.Fatalf("%+v epoch %d: At(%d)=%d, torch %d", d, e, p, got, w)
					}
				}
				// Fill in chunks of every shape (short tails, 4-wide
				// groups, one big buffer) must agree too.
				buf := make([]int64, len(want)+9)
				for _, chunk := range []int{1, 3, 4, 7, 9, len(buf)} {
					var filled []int64
					for s := int64(0); s < ep.Len(); s += int64(chunk) {
						filled = append(filled, ep.Fill(buf[:chunk], s)...)
					}
					if !slices.Equal(filled, want) {
						t.Fatalf("%+v epoch %d chunk %d: Fill %v, torch %v", d, e, chunk, filled, want)
					}
				}
				if ep.At(-1) != -1 || ep.At(ep.Len()) != -1 || len(ep.Fill(buf, ep.Len())) != 0 || len(ep.Fill(buf, -1)) != 0 {
					t.Fatalf("%+v: out-of-range positions not rejected", d)
				}
			}
		}
	})
}

// TestRankProperties checks the distributed invariants directly: equal
// counts, disjoint ranks apart from the padding, and full coverage (or at
// most World-1 dropped).
func TestRankProperties(t *testing.T) {
	forConfigs(func(d Distributed) {
		for e := range int64(3) {
			ord := epochOrder(d, e)
			want := d.N / int64(d.World)
			if !d.DropLast && d.N%int64(d.World) != 0 {
				want++
			}
			count := make([]int64, d.N)
			for r, idx := range ranks(d, e) {
				if int64(len(idx)) != want {
					t.Fatalf("%+v rank %d: %d samples, want %d", d, r, len(idx), want)
				}
				for _, v := range idx {
					count[v]++
				}
			}
			// Expected multiset: the order once (all of it, or all but
			// its last Dropped() entries) plus its first Padding()
			// entries again, wrapping as often as needed.
			expect := make([]int64, d.N)
			kept := d.N - d.Dropped()
			if d.Dropped() > int64(d.World-1) {
				t.Fatalf("%+v: %d dropped", d, d.Dropped())
			}
			for i := range kept {
				expect[ord[i]]++
			}
			for i := range d.Padding() {
				expect[ord[i%d.N]]++
			}
			if !slices.Equal(count, expect) {
				t.Fatalf("%+v epoch %d: index counts %v, want %v", d, e, count, expect)
			}
			if d.Padding() == 0 && d.Dropped() == 0 && slices.ContainsFunc(count, func(c int64) bool { return c != 1 }) {
				t.Fatalf("%+v: ranks overlap without padding", d)
			}
		}
	})
}

func TestShuffleEpochs(t *testing.T) {
	d := Distributed{N: 1000, World: 3, Rank: 1, Seed: 5, Shuffle: true}
	a, b := ranks(d, 0)[1], ranks(d, 1)[1]
	if slices.Equal(a, b) {
		t.Error("epochs 0 and 1 give the same order")
	}
	if !slices.Equal(a, ranks(d, 0)[1]) {
		t.Error("epoch 0 is not reproducible")
	}
	d2 := d
	d2.Seed = 6
	if slices.Equal(a, ranks(d2, 0)[1]) {
		t.Error("seeds 5 and 6 give the same order")
	}
	d.Shuffle = false
	for p, v := range ranks(d, 3)[1] {
		if want := int64(1+3*p) % 1000; v != want { // the last one wraps
			t.Fatalf("no shuffle: position %d holds %d, want %d", p, v, want)
		}
	}
}

func TestInvalidEpoch(t *testing.T) {
	ep := Distributed{N: 10, Rank: 4, World: 4}.Epoch(0)
	if ep.Len() != 0 || ep.At(0) != -1 || len(ep.Fill(make([]int64, 4), 0)) != 0 {
		t.Errorf("invalid config gave a non-empty epoch: len %d", ep.Len())
	}
	if (Distributed{N: -1, World: 2}).NumSamples() != 0 {
		t.Error("invalid config gave samples")
	}
}

// TestBillion plans a 1e9-sample epoch and reads scattered positions. The
// time bound is ~1000× what it needs; it catches anything that
// materialises the permutation.
func TestBillion(t *testing.T) {
	start := time.Now()
	d := Distributed{N: 1e9, World: 8, Rank: 5, Seed: 3, Shuffle: true}
	ep := d.Epoch(2)
	if ep.Len() != 125_000_000 {
		t.Fatalf("Len %d", ep.Len())
	}
	seen := map[int64]bool{}
	buf := make([]int64, 256)
	for k := range int64(4000) {
		p := int64(mix64(uint64(k)) % uint64(ep.Len()))
		v := ep.At(p)
		if v < 0 || v >= d.N || v != ep.perm.At(int64(d.Rank)+p*8) {
			t.Fatalf("At(%d)=%d", p, v)
		}
		seen[v] = true
		if k%100 == 0 && ep.Fill(buf, p)[0] != v {
			t.Fatalf("Fill disagrees with At at %d", p)
		}
	}
	if len(seen) < 3990 {
		t.Errorf("only %d distinct indices of 4000", len(seen))
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("took %v", el)
	}
}
