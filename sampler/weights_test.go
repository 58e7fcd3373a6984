package sampler

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func mustWeights(t testing.TB, w []float64, k int64) *Weights {
	t.Helper()
	tab, err := NewWeights(w, k)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// draws materialises the list the ranks of a weighted epoch share.
func draws(d Distributed, e int64) []int64 {
	out := make([]int64, d.Weights.Samples())
	for g := range out {
		out[g] = d.Weights.Draw(WeightsKey(d.Seed, e), int64(g))
	}
	return out
}

func TestNewWeightsErrors(t *testing.T) {
	cases := []struct {
		name string
		w    []float64
		k    int64
		want string
	}{
		{"empty", nil, 0, "no weights"},
		{"negative", []float64{1, -2}, 0, "weight 1 is -2"},
		{"nan", []float64{1, 1, math.NaN()}, 0, "weight 2 is NaN"},
		{"inf", []float64{math.Inf(1)}, 0, "weight 0 is +Inf"},
		{"all zero", []float64{0, 0, 0}, 0, "all 3 weights are zero"},
		{"negative draws", []float64{1}, -1, "-1 draws per epoch"},
		{"too many draws", []float64{1}, MaxN + 1, "draws per epoch"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewWeights(c.w, c.k)
			if !errors.Is(err, ErrWeights) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("NewWeights(%v, %d) = %v, want ErrWeights saying %q", c.w, c.k, err, c.want)
			}
		})
	}
}

// TestWeightsTable checks that the alias table realises every weight's
// share to within a unit of 2^-63, extreme weights included, and gives a
// zero weight nothing.
func TestWeightsTable(t *testing.T) {
	cases := [][]float64{
		{1},
		{0, 1},
		{1, 0, 0, 0},
		{1, 2, 3, 4},
		{1e300, 1e-300, 1, 0, 1e300},
		{5e-324, 5e-324, 0},
		{0.1, 0.2, 0.3, 0.4, 0, 0, 7},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{2, 3, 17, 100, 257} {
		w := make([]float64, n)
		for i := range w {
			switch rng.IntN(4) {
			case 0: // zero
			case 1:
				w[i] = math.Ldexp(rng.Float64(), rng.IntN(200)-100)
			default:
				w[i] = rng.Float64()
			}
		}
		w[rng.IntN(n)] = 1
		cases = append(cases, w)
	}
	for _, w := range cases {
		tab := mustWeights(t, w, 0)
		if tab.Len() != int64(len(w)) || tab.Samples() != int64(len(w)) {
			t.Errorf("%v: Len %d, Samples %d", w, tab.Len(), tab.Samples())
		}
		top := slices.Max(w)
		sum := 0.0
		for _, x := range w {
			sum += x / top
		}
		total := 0.0
		for i, x := range w {
			p := tab.Prob(int64(i))
			total += p
			if want := x / top / sum; math.Abs(p-want) > 1e-12 || (x == 0) != (p == 0) {
				t.Errorf("%v: Prob(%d) = %g, want %g", w, i, p, want)
			}
		}
		if math.Abs(total-1) > 1e-12 {
			t.Errorf("%v: probabilities sum to %g", w, total)
		}
	}
}

// TestWeightsFrequencies draws 200,000 times from fixed weights under a
// fixed seed and checks the counts with a chi-square test. The threshold
// is far in the tail (p ≈ 1e-12 for 8 degrees of freedom), and the draws
// are deterministic, so the test cannot flake; it fails when the sampler
// is biased.
func TestWeightsFrequencies(t *testing.T) {
	w := []float64{0, 1, 2, 3, 4, 5, 0, 10, 0.5, 30}
	const k = 200_000
	d := Distributed{N: int64(len(w)), World: 1, Seed: 42, Shuffle: true, Weights: mustWeights(t, w, k)}
	ep := d.Epoch(3)
	counts := make([]float64, len(w))
	for _, i := range ep.Fill(make([]int64, ep.Len()), 0) {
		counts[i]++
	}
	sum := 0.0
	for _, x := range w {
		sum += x
	}
	chi2 := 0.0
	for i, x := range w {
		if x == 0 {
			if counts[i] != 0 {
				t.Errorf("zero-weight index %d drawn %v times", i, counts[i])
			}
			continue
		}
		e := k * x / sum
		chi2 += (counts[i] - e) * (counts[i] - e) / e
	}
	if chi2 > 70 {
		t.Errorf("chi-square %.1f over 7 degrees of freedom: counts %v for weights %v", chi2, counts, w)
	}
}

// TestWeightsBalanced: weights 1/count of the class give every class of
// an imbalanced dataset the same share of the draws.
func TestWeightsBalanced(t *testing.T) {
	sizes := []int{900, 90, 9, 1} // classes 0..3, 1000 samples
	var labels []int
	for c, s := range sizes {
		for range s {
			labels = append(labels, c)
		}
	}
	w := make([]float64, len(labels))
	for i, c := range labels {
		w[i] = 1 / float64(sizes[c])
	}
	const k = 100_000
	d := Distributed{N: int64(len(w)), World: 1, Seed: 7, Shuffle: true, Weights: mustWeights(t, w, k)}
	ep := d.Epoch(0)
	counts := make([]int, len(sizes))
	for _, i := range ep.Fill(make([]int64, ep.Len()), 0) {
		counts[labels[i]]++
	}
	for c, n := range counts {
		if math.Abs(float64(n)-k/4) > 0.02*k { // 0.02 is 10 standard deviations
			t.Errorf("class %d (of %d samples) drawn %d times of %d: counts %v", c, sizes[c], n, k, counts)
		}
	}
}

// TestWeightedRanks: every rank's plan is its share (r, r+W, …) of the
// epoch's draw list, padded by wrapping or cut as Distributed does for an
// order, for draw counts below, at and above N; plans are deterministic
// and differ between epochs.
func TestWeightedRanks(t *testing.T) {
	w := []float64{3, 0, 1, 1, 2, 5, 0.5}
	for _, k := range []int64{1, 5, 7, 20, 33} {
		tab := mustWeights(t, w, k)
		for _, world := range []int{1, 2, 3, 4, 8} {
			for _, drop := range []bool{false, true} {
				d := Distributed{N: int64(len(w)), World: world, Seed: 5, Shuffle: true, DropLast: drop, Weights: tab}
				name := fmt.Sprintf("K=%d world=%d droplast=%t", k, world, drop)
				if d.EpochLen() != k || d.Padding()+k != d.TotalSize() && !drop || drop && d.Dropped()+d.TotalSize() != k {
					t.Fatalf("%s: EpochLen %d, TotalSize %d, Padding %d, Dropped %d", name, d.EpochLen(), d.TotalSize(), d.Padding(), d.Dropped())
				}
				list := draws(d, 2)
				var union []int64
				got := ranks(d, 2)
				for j := range d.NumSamples() {
					for r := range world {
						union = append(union, got[r][j])
					}
				}
				for g, i := range union {
					if i != list[int64(g)%k] {
						t.Fatalf("%s: entry %d of the ranks' union is %d, the draw list has %d", name, g, i, list[int64(g)%k])
					}
				}
				if int64(len(union)) != d.TotalSize() {
					t.Fatalf("%s: %d entries, TotalSize %d", name, len(union), d.TotalSize())
				}
				if again := ranks(d, 2); !slices.EqualFunc(got, again, slices.Equal) {
					t.Fatalf("%s: a second plan of the epoch differs", name)
				}
			}
		}
	}
	big := Distributed{N: 7, World: 1, Seed: 5, Shuffle: true, Weights: mustWeights(t, w, 64)}
	if slices.Equal(draws(big, 0), draws(big, 1)) {
		t.Error("epochs 0 and 1 draw the same list")
	}
}

// TestWeightedResume: a cursor resumed at any position, and an elastic
// chain of worlds resumed at global positions, take exactly the draws
// of the uninterrupted epoch (refRun over the draw list).
func TestWeightedResume(t *testing.T) {
	w := []float64{1, 2, 0, 4, 1, 1, 3, 0, 2}
	for _, k := range []int64{9, 4, 25} {
		tab := mustWeights(t, w, k)
		for _, world := range []int{1, 3} {
			d := Distributed{N: 9, World: world, Rank: world - 1, Seed: 9, Shuffle: true, Weights: tab}
			cursor := func(p Position) *Cursor {
				c, err := NewCursor(d, 2, false, p)
				if err != nil {
					t.Fatal(err)
				}
				if err := c.SetEpochs(3); err != nil {
					t.Fatal(err)
				}
				return c
			}
			all := walk(t, cursor(Position{}), 1000)
			for i, s := range all {
				if rest := walk(t, cursor(s.pos), 1000); !slices.EqualFunc(rest, all[i:], func(a, b step) bool {
					return a.pos == b.pos && slices.Equal(a.idx, b.idx)
				}) {
					t.Fatalf("K=%d world=%d: resumed at %v: %v, want %v", k, world, s.pos, rest, all[i:])
				}
			}
		}
		base := Distributed{N: 9, Seed: 9, Shuffle: true, Weights: tab}
		order := draws(base, 2)
		for _, chain := range elasticChains {
			for _, drop := range []bool{false, true} {
				base.DropLast = drop
				segs := make([]segment, len(chain))
				for i, w := range chain {
					segs[i] = segment{World: w, BS: 1 + i%2, Stop: 1}
				}
				d0 := base
				d0.World = chain[0]
				if d0.NumSamples() == 0 {
					continue
				}
				got, resumes := runSegments(t, base, 2, segs, false)
				if want := refRun(order, segs, drop, false); !slices.Equal(got, want) {
					t.Fatalf("K=%d chain %v droplast=%t (resumed at %v):\n got %v\nwant %v", k, chain, drop, resumes, got, want)
				}
			}
		}
	}
}

func TestWeightsValidate(t *testing.T) {
	tab := mustWeights(t, []float64{1, 2, 3}, 0)
	shards, err := NewShards([]Run{{Shard: 0, Len: 3}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		d    Distributed
		want string
	}{
		{"length", Distributed{N: 4, World: 1, Weights: tab}, "3 weights for 4 samples"},
		{"torch", Distributed{N: 3, World: 1, Shuffle: true, Order: Torch, Weights: tab}, "excludes order torch"},
		{"shards", Distributed{N: 3, World: 1, Shuffle: true, Shards: shards, Weights: tab}, "excludes a shard order"},
	}
	for _, c := range cases {
		err := c.d.Validate()
		if !errors.Is(err, ErrWeights) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Validate() = %v, want ErrWeights saying %q", c.name, err, c.want)
		}
		if c.d.Epoch(0).Len() != 0 {
			t.Errorf("%s: an invalid plan has positions", c.name)
		}
	}
	// Without Shuffle the weights are ignored: the epoch is [0, N).
	d := Distributed{N: 3, World: 1, Weights: mustWeights(t, []float64{1, 2, 3}, 10)}
	if ep := d.Epoch(0); !slices.Equal(ep.Fill(make([]int64, 5), 0), []int64{0, 1, 2}) {
		t.Errorf("unshuffled weighted epoch: %v", ep.Fill(make([]int64, 5), 0))
	}
}

func BenchmarkWeighted(b *testing.B) {
	for _, n := range []int{50_000, 1 << 24} {
		w := make([]float64, n)
		for i := range w {
			w[i] = float64(i%10 + 1)
		}
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			b.Run("build", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					mustWeights(b, w, 0)
				}
			})
			ep := Distributed{N: int64(n), World: 1, Seed: 1, Shuffle: true, Weights: mustWeights(b, w, 0)}.Epoch(0)
			b.Run("fill256", func(b *testing.B) {
				buf := make([]int64, 256)
				b.ReportAllocs()
				b.SetBytes(8 * 256)
				start := int64(0)
				for b.Loop() {
					ep.Fill(buf, start)
					start += 256
					if start >= ep.Len() {
						start = 0
					}
				}
				b.ReportMetric(float64(b.N)*256/b.Elapsed().Seconds(), "indices/s")
			})
		})
	}
}
