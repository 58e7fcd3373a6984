package sampler

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"testing"
)

// shardRuns cuts [0, n) into shards of the given sizes, one run each.
func shardRuns(sizes ...int64) []Run {
	var out []Run
	var at int64
	for k, s := range sizes {
		out = append(out, Run{Start: at, Len: s, Shard: int32(k)})
		at += s
	}
	return out
}

// interleavedRuns is the folder layout: shard k holds every samples run
// of `chunk` indices whose number is k mod shards.
func interleavedRuns(n, chunk int64, shards int32) []Run {
	var out []Run
	for at, i := int64(0), int32(0); at < n; at, i = at+chunk, i+1 {
		out = append(out, Run{Start: at, Len: min(chunk, n-at), Shard: i % shards})
	}
	return out
}

// shardOf maps each index to its shard, from the runs.
func shardOf(runs []Run, n int64) []int32 {
	out := make([]int32, n)
	for _, r := range runs {
		for i := r.Start; i < r.Start+r.Len; i++ {
			out[i] = r.Shard
		}
	}
	return out
}

var shardCases = []struct {
	name   string
	runs   []Run
	window int
}{
	{"one-shard", shardRuns(37), 4},
	{"equal", shardRuns(100, 100, 100, 100, 100, 100, 100), 2},
	{"uneven", shardRuns(1, 50, 7, 300, 2, 2, 90, 13, 64), 3},
	{"window-1", shardRuns(10, 20, 30, 40), 1},
	{"window-all", shardRuns(10, 20, 30, 40), 9},
	{"folder-layout", interleavedRuns(1000, 37, 6), 2},
	{"runs-out-of-order", func() []Run { r := shardRuns(5, 6, 7, 8, 9); slices.Reverse(r); return r }(), 2},
}

func shardedOrder(t *testing.T, d Distributed, epoch int64) []int64 {
	t.Helper()
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	ep := d.Epoch(epoch)
	out := ep.Fill(make([]int64, ep.Len()), 0)
	for p := range out { // At and Fill agree
		if ep.At(int64(p)) != out[p] {
			t.Fatalf("At(%d)=%d, Fill gave %d", p, ep.At(int64(p)), out[p])
		}
	}
	return out
}

// TestShardsPermutation: every epoch is a permutation of [0, N), keyed by
// (seed, epoch) only, different from epoch to epoch, and ranks split it
// with DistributedSampler's arithmetic: disjoint, equal, covering.
func TestShardsPermutation(t *testing.T) {
	for _, c := range shardCases {
		t.Run(c.name, func(t *testing.T) {
			s, err := NewShards(c.runs, c.window)
			if err != nil {
				t.Fatal(err)
			}
			n := s.Len()
			for _, seed := range []uint64{0, 7} {
				var prev []int64
				for epoch := range int64(3) {
					full := shardedOrder(t, Distributed{N: n, World: 1, Seed: seed, Shuffle: true, Shards: s}, epoch)
					if !isPerm(full) {
						t.Fatalf("seed %d epoch %d: not a permutation of [0,%d)", seed, epoch, n)
					}
					// The same runs given again (another Shards value) give the same order.
					s2, _ := NewShards(slices.Clone(c.runs), c.window)
					if again := shardedOrder(t, Distributed{N: n, World: 1, Seed: seed, Shuffle: true, Shards: s2}, epoch); !slices.Equal(full, again) {
						t.Fatal("the order depends on more than (seed, epoch)")
					}
					if n > 30 && slices.Equal(full, prev) {
						t.Fatalf("epochs %d and %d have the same order", epoch-1, epoch)
					}
					prev = full
					for _, world := range []int{2, 3, 5} {
						for _, drop := range []bool{false, true} {
							checkRanks(t, Distributed{N: n, World: world, Seed: seed, Shuffle: true, DropLast: drop, Shards: s}, epoch, full)
						}
					}
				}
			}
		})
	}
}

func isPerm(x []int64) bool {
	seen := make([]bool, len(x))
	for _, v := range x {
		if v < 0 || v >= int64(len(x)) || seen[v] {
			return false
		}
		seen[v] = true
	}
	return true
}

// checkRanks: rank r's position p is entry (r + p·World) mod N of the
// one-rank order, every rank has NumSamples positions, and apart from the
// padding no index is seen twice.
func checkRanks(t *testing.T, d Distributed, epoch int64, full []int64) {
	t.Helper()
	seen := map[int64]int{}
	for r := range d.World {
		d.Rank = r
		got := shardedOrder(t, d, epoch)
		if int64(len(got)) != d.NumSamples() {
			t.Fatalf("world %d rank %d: %d positions, want %d", d.World, r, len(got), d.NumSamples())
		}
		for p, v := range got {
			if want := full[(int64(r)+int64(p)*int64(d.World))%d.N]; v != want {
				t.Fatalf("world %d rank %d pos %d: %d, want %d", d.World, r, p, v, want)
			}
			seen[v]++
		}
	}
	repeats := 0
	for _, c := range seen {
		repeats += c - 1
	}
	if int64(repeats) != d.Padding() || int64(len(seen)) != d.N-d.Dropped() {
		t.Fatalf("world %d droplast %v: %d distinct, %d repeats; want %d, %d", d.World, d.DropLast, len(seen), repeats, d.N-d.Dropped(), d.Padding())
	}
}

// TestShardsWindows: an epoch's order is a sequence of windows, each
// holding every sample of exactly Window shards (fewer in the last) and
// nothing else; the shards in the windows vary with the epoch.
func TestShardsWindows(t *testing.T) {
	for _, c := range shardCases {
		t.Run(c.name, func(t *testing.T) {
			s, err := NewShards(c.runs, c.window)
			if err != nil {
				t.Fatal(err)
			}
			of := shardOf(c.runs, s.Len())
			firsts := map[string]bool{}
			for epoch := range int64(8) {
				full := shardedOrder(t, Distributed{N: s.Len(), World: 1, Seed: 3, Shuffle: true, Shards: s}, epoch)
				// Span of positions per shard; windows are W shards taken by first position.
				lo, hi := map[int32]int{}, map[int32]int{}
				for p, v := range full {
					k := of[v]
					if _, ok := lo[k]; !ok {
						lo[k] = p
					}
					hi[k] = p
				}
				ks := make([]int32, 0, len(lo))
				for k := range lo {
					ks = append(ks, k)
				}
				sort.Slice(ks, func(a, b int) bool { return lo[ks[a]] < lo[ks[b]] })
				at := 0
				for w := 0; w*c.window < len(ks); w++ {
					group := ks[w*c.window : min((w+1)*c.window, len(ks))]
					var size int64
					end := 0
					for _, k := range group {
						size += s.size[k]
						end = max(end, hi[k])
						if lo[k] < at {
							t.Fatalf("epoch %d: shard %d starts at %d, before window %d at %d", epoch, k, lo[k], w, at)
						}
					}
					if int64(end-at+1) != size {
						t.Fatalf("epoch %d window %d: shards %v span positions %d..%d, but hold %d samples", epoch, w, group, at, end, size)
					}
					at = end + 1
				}
				firsts[fmt.Sprint(ks[:min(c.window, len(ks))])] = true
			}
			if s.Count() > c.window && len(firsts) < 2 {
				t.Fatalf("the first window holds the same shards in 8 epochs: %v", firsts)
			}
		})
	}
}

// TestShardsShardOrderUniform: over many epochs each of 8 shards opens the
// epoch about equally often (chi-square, 7 degrees of freedom).
func TestShardsShardOrderUniform(t *testing.T) {
	s, err := NewShards(shardRuns(1, 1, 1, 1, 1, 1, 1, 1), 1)
	if err != nil {
		t.Fatal(err)
	}
	const epochs = 4000
	var count [8]float64
	for e := range int64(epochs) {
		count[s.epoch(EpochKey(11, e)).order[0]]++
	}
	chi := 0.0
	for _, c := range count {
		chi += (c - epochs/8) * (c - epochs/8) / (epochs / 8)
	}
	if chi > 24.3 { // p = 0.001
		t.Fatalf("chi-square %.1f over %v", chi, count)
	}
}

func TestShardsInvalid(t *testing.T) {
	for _, c := range []struct {
		runs   []Run
		window int
	}{
		{shardRuns(3, 4), 0},
		{[]Run{{0, 3, 0}, {4, 2, 1}}, 1}, // gap
		{[]Run{{0, 3, 0}, {2, 2, 1}}, 1}, // overlap
		{[]Run{{0, 3, 0}, {3, 0, 1}}, 1}, // empty run
		{[]Run{{0, 3, -1}}, 1},           // negative shard
		{nil, 1},                         // nothing
	} {
		if _, err := NewShards(c.runs, c.window); !errors.Is(err, ErrShards) {
			t.Errorf("%v window %d: %v, want ErrShards", c.runs, c.window, err)
		}
	}
	s, _ := NewShards(shardRuns(3, 4), 1)
	if err := (Distributed{N: 8, World: 1, Shuffle: true, Shards: s}).Validate(); !errors.Is(err, ErrShards) {
		t.Fatalf("N=8 over shards of 7: %v", err)
	}
}

// Unshuffled, the shard order changes nothing: the identity.
func TestShardsNoShuffle(t *testing.T) {
	s, _ := NewShards(shardRuns(5, 6, 7), 2)
	got := shardedOrder(t, Distributed{N: 18, World: 1, Shards: s}, 0)
	for i, v := range got {
		if v != int64(i) {
			t.Fatalf("position %d: %d", i, v)
		}
	}
}

func BenchmarkShardsFill(b *testing.B) {
	s, _ := NewShards(interleavedRuns(1_281_167, 1251, 1024), 8)
	d := Distributed{N: s.Len(), World: 1, Shuffle: true, Shards: s}
	ep := d.Epoch(1)
	dst := make([]int64, 256)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		ep.Fill(dst, int64(i*256)%(s.Len()-256))
	}
}

func ExampleNewShards() {
	// Three shards of 4 samples, mixed two shards at a time.
	s, err := NewShards([]Run{{Start: 0, Len: 4, Shard: 0}, {Start: 4, Len: 4, Shard: 1}, {Start: 8, Len: 4, Shard: 2}}, 2)
	if err != nil {
		panic(err)
	}
	d := Distributed{N: 12, World: 1, Seed: 1, Shuffle: true, Shards: s}
	ep := d.Epoch(0)
	idx := ep.Fill(make([]int64, ep.Len()), 0)
	var shards []int64
	for _, i := range idx {
		shards = append(shards, i/4)
	}
	fmt.Println(shards) // the shard of each position: shards 1 and 0 mixed, then shard 2
	// Output: [1 0 1 0 1 1 0 0 2 2 2 2]
}
