package sampler

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
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

// torchVectors is testdata/distributed-vectors.json: what PyTorch's own
// DistributedSampler yields, written by scripts/sampler-vectors.py.
//
// Identity holds shuffle=False over range(N) for every (N, world,
// drop_last) of propNs × propWorlds: each rank's list is then the positions
// of the epoch order it takes, padding (wrapping to total_size) and the
// drop_last cut included, and torch's split of any order is that order read
// at those positions. Shuffled holds torch's own shuffled epoch orders and
// its split of them, pinning the same rule on a non-identity order.
type torchVectors struct {
	Torch    string         `json:"torch"`
	Epochs   []int64        `json:"epochs"`
	Identity []identityCase `json:"identity"`
	Shuffled []shuffledCase `json:"shuffled"`
}

type identityCase struct {
	N          int64     `json:"n"`
	World      int       `json:"world"`
	DropLast   bool      `json:"drop_last"`
	NumSamples int64     `json:"num_samples"`
	TotalSize  int64     `json:"total_size"`
	Ranks      [][]int64 `json:"ranks"`
}

type shuffledCase struct {
	N     int64   `json:"n"`
	Seed  uint64  `json:"seed"`
	Epoch int64   `json:"epoch"`
	Order []int64 `json:"order"` // torch's epoch order (world 1)
	Cases []struct {
		World    int       `json:"world"`
		DropLast bool      `json:"drop_last"`
		Ranks    [][]int64 `json:"ranks"`
	} `json:"cases"`
}

func (c identityCase) String() string {
	return fmt.Sprintf("N=%d world=%d drop_last=%t", c.N, c.World, c.DropLast)
}

// loadTorchVectors reads and sanity-checks the vectors file.
func loadTorchVectors(t *testing.T) *torchVectors {
	t.Helper()
	const path = "testdata/distributed-vectors.json"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (regenerate with /usr/bin/python3 scripts/sampler-vectors.py)", err)
	}
	var v torchVectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(v.Epochs) == 0 || len(v.Identity) == 0 || len(v.Shuffled) == 0 {
		t.Fatalf("%s: %d epochs, %d identity cases, %d shuffled cases; want some of each",
			path, len(v.Epochs), len(v.Identity), len(v.Shuffled))
	}
	for _, c := range v.Identity {
		if len(c.Ranks) != c.World || c.TotalSize != c.NumSamples*int64(c.World) {
			t.Fatalf("%s: %v: %d rank lists, num_samples %d, total_size %d", path, c, len(c.Ranks), c.NumSamples, c.TotalSize)
		}
		for r, idx := range c.Ranks {
			if int64(len(idx)) != c.NumSamples {
				t.Fatalf("%s: %v rank %d: %d entries, num_samples %d", path, c, r, len(idx), c.NumSamples)
			}
		}
	}
	return &v
}

// identity returns the identity case for (n, world, drop), or nil.
func (v *torchVectors) identity(n int64, world int, drop bool) *identityCase {
	for i, c := range v.Identity {
		if c.N == n && c.World == world && c.DropLast == drop {
			return &v.Identity[i]
		}
	}
	return nil
}

// checkEpoch compares one rank's plan with want through Len, At and Fill
// in chunks of every shape (short tails, 4-wide groups, one big buffer),
// and checks that positions outside [0, Len()) are rejected.
func checkEpoch(t *testing.T, name string, ep Epoch, want []int64) {
	t.Helper()
	if ep.Len() != int64(len(want)) {
		t.Fatalf("%s: Len %d, torch %d", name, ep.Len(), len(want))
	}
	for p, w := range want {
		if got := ep.At(int64(p)); got != w {
			t.Fatalf("%s: At(%d) = %d, torch %d (torch's list %v)", name, p, got, w, want)
		}
	}
	buf := make([]int64, len(want)+9)
	for _, chunk := range []int{1, 3, 4, 7, 9, len(buf)} {
		var filled []int64
		for s := int64(0); s < ep.Len(); s += int64(chunk) {
			filled = append(filled, ep.Fill(buf[:chunk], s)...)
		}
		if !slices.Equal(filled, want) {
			t.Fatalf("%s: Fill in chunks of %d gives %v, torch %v", name, chunk, filled, want)
		}
	}
	if ep.At(-1) != -1 || ep.At(ep.Len()) != -1 || len(ep.Fill(buf, ep.Len())) != 0 || len(ep.Fill(buf, -1)) != 0 {
		t.Fatalf("%s: out-of-range positions not rejected", name)
	}
}

// TestHandVectors pins a few shuffle=False splits written out by hand, as
// readable examples; each must also be torch's (the vectors file) and
// loaderd's, in any epoch.
func TestHandVectors(t *testing.T) {
	v := loadTorchVectors(t)
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
		name := fmt.Sprintf("N=%d world=%d drop_last=%t", c.n, c.world, c.drop)
		switch tc := v.identity(c.n, c.world, c.drop); {
		case tc == nil:
			t.Errorf("%s: not in the torch vectors", name)
		case !slices.EqualFunc(tc.Ranks, c.want, slices.Equal):
			t.Errorf("%s: hand vector %v, torch %v", name, c.want, tc.Ranks)
		}
		d := Distributed{N: c.n, World: c.world, DropLast: c.drop, Seed: 99}
		for _, e := range []int64{0, 5} {
			if got := ranks(d, e); !slices.EqualFunc(got, c.want, slices.Equal) {
				t.Errorf("%s epoch %d: got %v, want %v", name, e, got, c.want)
			}
		}
	}
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
	if d.Order == Torch {
		return TorchRandperm(d.N, d.Seed+uint64(e))
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

// TestMatchesTorch compares every rank's plan, in each epoch of the
// vectors, with torch's split of the same epoch order: for shuffle=False
// the identity, for shuffle=True loaderd's own permutation, read at the
// positions torch's identity split takes. It also compares NumSamples,
// TotalSize, Padding and Dropped with torch's num_samples and total_size.
func TestMatchesTorch(t *testing.T) {
	v := loadTorchVectors(t)
	forConfigs(func(d Distributed) {
		if v.identity(d.N, d.World, d.DropLast) == nil {
			t.Errorf("N=%d world=%d drop_last=%t: not in the torch vectors; add it to scripts/sampler-vectors.py", d.N, d.World, d.DropLast)
		}
	})
	for _, c := range v.Identity {
		t.Run(fmt.Sprintf("N=%d/world=%d/drop_last=%t", c.N, c.World, c.DropLast), func(t *testing.T) {
			d := Distributed{N: c.N, World: c.World, Seed: 11, DropLast: c.DropLast}
			var padding, dropped int64
			if c.DropLast {
				dropped = c.N - c.TotalSize
			} else {
				padding = c.TotalSize - c.N
			}
			if d.NumSamples() != c.NumSamples || d.TotalSize() != c.TotalSize || d.Padding() != padding || d.Dropped() != dropped {
				t.Errorf("%v: num_samples/total_size/padding/dropped = %d/%d/%d/%d, torch %d/%d/%d/%d", c,
					d.NumSamples(), d.TotalSize(), d.Padding(), d.Dropped(), c.NumSamples, c.TotalSize, padding, dropped)
			}
			for _, shuffle := range []bool{false, true} {
				d.Shuffle = shuffle
				for _, e := range v.Epochs {
					ord := epochOrder(d, e)
					for r, pos := range c.Ranks {
						want := make([]int64, len(pos))
						for p, g := range pos {
							want[p] = ord[g]
						}
						d.Rank = r
						checkEpoch(t, fmt.Sprintf("%v shuffle=%t epoch %d rank %d", c, shuffle, e, r), d.Epoch(e), want)
					}
				}
			}
		})
	}
}

// TestMatchesTorchShuffled pins the split on torch's own shuffled orders:
// rank r's torch list is torch's order read at the positions loaderd's
// plan takes.
func TestMatchesTorchShuffled(t *testing.T) {
	v := loadTorchVectors(t)
	for _, s := range v.Shuffled {
		inv := make([]int64, s.N) // index → position in torch's order
		seen := make([]bool, s.N)
		if int64(len(s.Order)) != s.N {
			t.Fatalf("N=%d seed=%d epoch %d: torch order has %d entries", s.N, s.Seed, s.Epoch, len(s.Order))
		}
		for p, i := range s.Order {
			if i < 0 || i >= s.N || seen[i] {
				t.Fatalf("N=%d seed=%d epoch %d: torch order %v is not a permutation", s.N, s.Seed, s.Epoch, s.Order)
			}
			seen[i], inv[i] = true, int64(p)
		}
		for _, c := range s.Cases {
			if len(c.Ranks) != c.World {
				t.Fatalf("N=%d world=%d: %d rank lists", s.N, c.World, len(c.Ranks))
			}
			for r, idx := range c.Ranks {
				want := make([]int64, len(idx))
				for p, i := range idx {
					if i < 0 || i >= s.N {
						t.Fatalf("N=%d world=%d rank %d: torch index %d out of range", s.N, c.World, r, i)
					}
					want[p] = inv[i]
				}
				d := Distributed{N: s.N, World: c.World, Rank: r, DropLast: c.DropLast}
				name := fmt.Sprintf("N=%d world=%d drop_last=%t rank %d, torch order of seed %d epoch %d (positions)",
					s.N, c.World, c.DropLast, r, s.Seed, s.Epoch)
				checkEpoch(t, name, d.Epoch(s.Epoch), want)
			}
		}
	}
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
