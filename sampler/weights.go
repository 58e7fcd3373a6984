package sampler

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// ErrWeights reports sampling weights that cannot be sampled from (a
// negative, NaN or infinite weight, all weights zero, too many samples),
// a draw count out of range, or weights combined with an order they
// exclude (Distributed.Validate).
var ErrWeights = errors.New("sampler: invalid weights")

// MaxWeighted is the largest dataset a Weights table holds: its aliases
// are 32-bit.
const MaxWeighted = 1 << 32

// Weights samples dataset indices with replacement, index i with
// probability w[i]/Σw: PyTorch's WeightedRandomSampler(w, K,
// replacement=True), but keyed rather than stateful, so that a draw is a
// pure function of (key, position) and any position of an epoch is
// computed directly (resume, ranks, workers need no shared state).
//
// Method: Walker's alias table, built by Vose's method in integers. Each
// weight is scaled to q[i] units of a total N·U, U = 2^u the largest power
// of two with N·U ≤ 2^63 (q[i] = ⌊w[i]/Σw·N·U⌋, at least 1 for a positive
// weight, the rounding remainder given to the largest weight), so the
// table is exact for those integers: no floating-point residue can give a
// zero weight a draw, and a probability is off by at most one unit,
// 2^-63 of the total. Column c keeps prob[c] ≤ U units of its own index
// and gives the rest to alias[c]. Draw g of an epoch with key k takes the
// SplitMix64 outputs x = mix64(k + (2g+1)·γ) and y = mix64(k + (2g+2)·γ)
// (γ = 2^64/φ): column c = ⌊x·N/2^64⌋, then c when the top u bits of y
// are below prob[c], alias[c] otherwise. A draw costs two mixes, a
// multiply and two table loads; the column's bias, N/2^64, is far below
// anything a run can see. The table costs 12 bytes a sample, built once
// and shared read-only by every stream.
//
// A Weights is immutable and safe for concurrent use.
type Weights struct {
	n     int64
	k     int64    // draws per epoch
	shift uint     // 64 - u: the top u bits of y are y >> shift
	prob  []uint64 // units of column c kept by index c, ≤ U
	alias []uint32
}

// NewWeights returns the alias table of w, drawing samples indices per
// epoch (torch's num_samples); samples 0 means len(w). Every problem is
// reported with an error wrapping ErrWeights that names the first bad
// index.
func NewWeights(w []float64, samples int64) (*Weights, error) {
	n := int64(len(w))
	switch {
	case n == 0:
		return nil, fmt.Errorf("%w: no weights", ErrWeights)
	case n > MaxWeighted:
		return nil, fmt.Errorf("%w: %d weights, at most 2^32", ErrWeights, n)
	case samples < 0 || samples > MaxN:
		return nil, fmt.Errorf("%w: %d draws per epoch, want 1..2^62", ErrWeights, samples)
	case samples == 0:
		samples = n
	}
	top := 0.0
	for i, x := range w {
		if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
			return nil, fmt.Errorf("%w: weight %d is %v, want a finite number ≥ 0", ErrWeights, i, x)
		}
		top = max(top, x)
	}
	if top == 0 {
		return nil, fmt.Errorf("%w: all %d weights are zero", ErrWeights, n)
	}
	// Scale by the largest weight first, so that the sum cannot overflow.
	sum := 0.0
	for _, x := range w {
		sum += x / top
	}
	u := 63 - uint(bits.Len64(uint64(n-1))) // N·2^u ≤ 2^63
	unit, total := uint64(1)<<u, uint64(n)<<u
	q := make([]uint64, n)
	var have uint64
	big := 0
	for i, x := range w {
		if x == 0 {
			continue
		}
		v := uint64(min(x/top/sum*float64(total), float64(total)))
		q[i] = max(v, 1)
		have += q[i]
		if q[i] > q[big] || w[big] == 0 {
			big = i
		}
	}
	// Rounding leaves have within about N units of total; the largest
	// weight holds at least total/N ≥ 2^31 units and absorbs it.
	q[big] += total - have
	t := &Weights{n: n, k: samples, shift: 64 - u, prob: q, alias: make([]uint32, n)}
	t.build(unit)
	return t, nil
}

// build turns the units q (held in prob) into Vose's alias table. Small
// columns (fewer than U units) are stacked from the front of work, large
// ones from the back; each small column is topped up from a large one,
// which becomes small once it falls below U. The sum of the units left is
// always U per column left, so when the small stack empties every large
// column left holds exactly U.
func (t *Weights) build(unit uint64) {
	q := t.prob
	work := make([]uint32, t.n)
	s, l := 0, len(work) // small: work[:s]; large: work[l:]
	for i, v := range q {
		if v < unit {
			work[s] = uint32(i)
			s++
		} else {
			l--
			work[l] = uint32(i)
		}
	}
	for i := range t.alias {
		t.alias[i] = uint32(i)
	}
	for s > 0 && l < len(work) {
		s--
		small, large := work[s], work[l]
		t.alias[small] = large
		q[large] -= unit - q[small]
		if q[large] < unit {
			l++
			work[s] = large
			s++
		}
	}
}

// Len returns the number of weights: the dataset size N.
func (t *Weights) Len() int64 { return t.n }

// Samples returns the draws per epoch, K: the length of the epoch list
// that Distributed pads or cuts and splits among the ranks.
func (t *Weights) Samples() int64 { return t.k }

// Prob returns the probability that a draw is index i (0 outside [0,
// Len())), as the table realises it: the weight's share, rounded to
// 2^-63 of the total. It scans the table, O(N): for checks, not draws.
func (t *Weights) Prob(i int64) float64 {
	if i < 0 || i >= t.n {
		return 0
	}
	units := t.prob[i]
	for c, a := range t.alias {
		if int64(a) == i && int64(c) != i {
			units += 1<<(64-t.shift) - t.prob[c]
		}
	}
	return float64(units) / float64(uint64(t.n)<<(64-t.shift))
}

// Draw returns draw g of the epoch keyed by key: the same index for the
// same (key, g), whoever asks.
func (t *Weights) Draw(key uint64, g int64) int64 {
	s := key + (2*uint64(g)+1)*golden
	x, y := mix64(s), mix64(s+golden)
	c, _ := bits.Mul64(x, uint64(t.n))
	if y>>t.shift < t.prob[c] {
		return int64(c)
	}
	return int64(t.alias[c])
}

// WeightsKey is the draw key of epoch e under seed: distinct from the
// permutation key EpochKey(seed, e), so that a weighted stream and a
// uniform one of the same seed are unrelated.
func WeightsKey(seed uint64, e int64) uint64 {
	return mix64(EpochKey(seed, e) ^ 0x5745494748545321) // "WEIGHTS!"
}

// checkWeights reports what makes d's Weights unusable: a table of
// another dataset, or one combined with a shard or torch order, which
// fix an order where weights draw at random.
func (d Distributed) checkWeights() error {
	switch {
	case d.Weights == nil:
		return nil
	case d.Weights.Len() != d.N:
		return fmt.Errorf("%w: %d weights for %d samples", ErrWeights, d.Weights.Len(), d.N)
	case d.Shards != nil:
		return fmt.Errorf("%w: weighted sampling excludes a shard order", ErrWeights)
	case d.Order != Uniform:
		return fmt.Errorf("%w: weighted sampling excludes order %v", ErrWeights, d.Order)
	}
	return nil
}
