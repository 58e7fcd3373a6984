package sampler

import (
	"errors"
	"fmt"
	"slices"
)

// ErrShards reports shard runs that do not describe the dataset: runs
// that overlap, leave a gap, or a window below 1.
var ErrShards = errors.New("sampler: invalid shard order")

// DefaultWindow is how many shards a shard-shuffled epoch mixes at once
// when the dataset option names none (order=shards).
const DefaultWindow = 4

// Run is a run of consecutive dataset indices [Start, Start+Len) that all
// live in shard Shard. A shard may have several runs (a tar of the
// folder layout orders samples by class across shards).
type Run struct {
	Start, Len int64
	Shard      int32
}

// Shards is a shard-shuffle order, the WebDataset way of reading sharded
// remote data: each epoch the shards are put in a keyed random order, cut
// into windows of Window consecutive shards, and the samples of each
// window are permuted among themselves. A reader then needs only one
// window's shards at a time (and can fetch the next window's ahead), at
// the price of randomness: a sample can only land beside samples of the
// shards in its window, and windows come one after the other.
//
// Set it as Distributed.Shards; it applies when Distributed.Shuffle is
// set. Like the uniform order it is a pure function of (seed, epoch):
// the shard order under key mix64(EpochKey(seed, e) ^ shardSalt), window
// w's permutation under mix64(EpochKey(seed, e) + (w+1)·golden). It is
// immutable and safe for concurrent use.
type Shards struct {
	n      int64
	window int
	runs   []Run   // by shard, then start
	first  []int32 // shard k's runs are runs[first[k]:first[k+1]]
	within []int64 // within[r]: samples of run r's shard before run r
	size   []int64 // samples per shard
}

const shardSalt = 0x5348415244534846 // "SHARDSHF": keys the shard order apart from window 0

// NewShards checks that runs tile [0, N) exactly (in any order) and
// returns the shard order over them with window shards per window.
func NewShards(runs []Run, window int) (*Shards, error) {
	if window < 1 {
		return nil, fmt.Errorf("%w: window %d, want ≥ 1", ErrShards, window)
	}
	rs := slices.Clone(runs)
	slices.SortFunc(rs, func(a, b Run) int { return cmpInt64(a.Start, b.Start) })
	var n int64
	shards := 0
	for _, r := range rs {
		if r.Start != n || r.Len <= 0 || r.Shard < 0 {
			return nil, fmt.Errorf("%w: run %+v (want start %d, length > 0, shard ≥ 0)", ErrShards, r, n)
		}
		n += r.Len
		shards = max(shards, int(r.Shard)+1)
	}
	if n == 0 || n > MaxN {
		return nil, fmt.Errorf("%w: %d samples", ErrShards, n)
	}
	slices.SortStableFunc(rs, func(a, b Run) int { return int(a.Shard) - int(b.Shard) })
	s := &Shards{n: n, window: window, runs: rs, first: make([]int32, shards+1), within: make([]int64, len(rs)), size: make([]int64, shards)}
	for i, r := range rs {
		s.within[i] = s.size[r.Shard]
		s.size[r.Shard] += r.Len
		s.first[r.Shard+1] = int32(i + 1)
	}
	for k := 1; k <= shards; k++ { // shards without runs
		s.first[k] = max(s.first[k], s.first[k-1])
	}
	return s, nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Len returns the number of samples the runs cover (Distributed.N).
func (s *Shards) Len() int64 { return s.n }

// Window returns the shards per window.
func (s *Shards) Window() int { return s.window }

// Count returns the number of shards.
func (s *Shards) Count() int { return len(s.size) }

// Runs returns a copy of the runs the order was made from, by shard, so
// that a subset of the dataset (a hold-out part) can make its own.
func (s *Shards) Runs() []Run { return slices.Clone(s.runs) }

// index returns the dataset index of sample off of shard k.
func (s *Shards) index(k int32, off int64) int64 {
	lo, hi := int(s.first[k]), int(s.first[k+1])
	if hi-lo == 1 {
		return s.runs[lo].Start + off
	}
	for lo+1 < hi { // the last run starting at or before off
		m := (lo + hi) / 2
		if s.within[m] <= off {
			lo = m
		} else {
			hi = m
		}
	}
	return s.runs[lo].Start + off - s.within[lo]
}

// shardEpoch is one epoch of a Shards order, computed once per epoch:
// O(shards) memory.
type shardEpoch struct {
	s     *Shards
	order []int32 // the shard at shuffled place j
	cum   []int64 // samples of order[:j]; len shards+1
	perms []Perm  // window w's permutation of its samples
}

// epoch lays out epoch key's order; nil for a nil s.
func (s *Shards) epoch(key uint64) *shardEpoch {
	if s == nil {
		return nil
	}
	k := len(s.size)
	e := &shardEpoch{s: s, order: make([]int32, k), cum: make([]int64, k+1)}
	p := NewPerm(int64(k), mix64(key^shardSalt))
	for j := range e.order {
		e.order[j] = int32(p.At(int64(j)))
		e.cum[j+1] = e.cum[j] + s.size[e.order[j]]
	}
	for w := 0; w*s.window < k; w++ {
		lo, hi := e.cum[w*s.window], e.cum[min((w+1)*s.window, k)]
		e.perms = append(e.perms, NewPerm(hi-lo, mix64(key+uint64(w+1)*golden)))
	}
	return e
}

// place returns the shuffled place j whose samples hold position p:
// cum[j] ≤ p < cum[j+1], searching [lo, hi).
func (e *shardEpoch) place(p int64, lo, hi int) int {
	for lo+1 < hi {
		m := (lo + hi) / 2
		if e.cum[m] <= p {
			lo = m
		} else {
			hi = m
		}
	}
	return lo
}

// at returns the dataset index at position p of the epoch's order.
func (e *shardEpoch) at(p int64) int64 {
	k := len(e.order)
	w := e.place(p, 0, k) / e.s.window
	lo, hi := w*e.s.window, min((w+1)*e.s.window, k)
	q := e.cum[lo] + e.perms[w].At(p-e.cum[lo])
	j := e.place(q, lo, hi)
	return e.s.index(e.order[j], q-e.cum[j])
}
