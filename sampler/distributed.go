package sampler

import (
	"errors"
	"fmt"
)

// MaxN is the largest dataset size a Distributed accepts. It keeps every
// padded total (< 2N) inside int64.
const MaxN = 1 << 62

// Configuration errors. Validate wraps each problem it finds in one of these
// and joins them, so callers test with errors.Is.
var (
	ErrEmptyDataset = errors.New("sampler: empty dataset")
	ErrSize         = errors.New("sampler: dataset size out of range")
	ErrWorld        = errors.New("sampler: world size below 1")
	ErrRank         = errors.New("sampler: rank out of range")
)

// Distributed plans each rank's share of every epoch, with the index
// arithmetic of PyTorch's DistributedSampler. Epoch e's order is a keyed
// permutation of [0, N) (key EpochKey(Seed, e)) when Shuffle is set, the
// identity otherwise; with Order Torch it is torch's own randperm, so
// that the plan is DistributedSampler's to the index. Without DropLast
// the order is padded by wrapping around to TotalSize; with it, it is cut
// to TotalSize. Rank r takes the positions r, r+World, r+2·World, … of
// that list.
type Distributed struct {
	N        int64
	Rank     int
	World    int
	Seed     uint64
	Shuffle  bool
	DropLast bool
	// Shards, when set with Shuffle, replaces the uniform order by a
	// shard-shuffle order over the same N (see Shards); nil: uniform.
	Shards *Shards
	// Order, with Shuffle, picks the epoch order: Uniform (the default:
	// the keyed permutation, or Shards when set), or Torch and
	// TorchLegacy, torch.randperm's order (Shards must then be nil).
	// Padding, cutting and splitting are the same for every order.
	Order Order
	// Weights, when set with Shuffle, replaces the order by
	// Weights.Samples() weighted draws with replacement (draw g of epoch
	// e is Weights.Draw(WeightsKey(Seed, e), g)), which are padded, cut
	// and split as an order is (see EpochLen). It excludes Shards and a
	// torch Order. Without Shuffle it is ignored: the epoch is [0, N).
	Weights *Weights
}

// EpochLen returns the length of the list that the ranks share each
// epoch before it is padded or cut: Weights.Samples() for a weighted
// plan, N otherwise. Offsets (EpochFrom, Position.Offset) count its
// entries.
func (d Distributed) EpochLen() int64 {
	if d.Shuffle && d.Weights != nil {
		return d.Weights.Samples()
	}
	return d.N
}

// Validate reports every problem with d at once. DropLast with N < World is
// allowed and gives every rank zero samples, as in PyTorch.
func (d Distributed) Validate() error {
	var errs []error
	switch {
	case d.N == 0:
		errs = append(errs, ErrEmptyDataset)
	case d.N < 0 || d.N > MaxN:
		errs = append(errs, fmt.Errorf("%w: N=%d, want 1..2^62", ErrSize, d.N))
	}
	if d.World < 1 {
		errs = append(errs, fmt.Errorf("%w: world=%d", ErrWorld, d.World))
	}
	if d.Rank < 0 || (d.World >= 1 && d.Rank >= d.World) {
		errs = append(errs, fmt.Errorf("%w: rank=%d, world=%d", ErrRank, d.Rank, d.World))
	}
	if d.Shards != nil && d.Shards.Len() != d.N {
		errs = append(errs, fmt.Errorf("%w: the shards hold %d samples, N=%d", ErrShards, d.Shards.Len(), d.N))
	}
	switch {
	case d.Order > TorchLegacy:
		errs = append(errs, fmt.Errorf("%w: %v", ErrOrder, d.Order))
	case d.Order != Uniform && d.Shards != nil:
		errs = append(errs, fmt.Errorf("%w: %v excludes a shard order", ErrOrder, d.Order))
	}
	if err := d.checkWeights(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (d Distributed) valid() bool {
	return d.N > 0 && d.N <= MaxN && d.World >= 1 && d.Rank >= 0 && d.Rank < d.World && (d.Shards == nil || d.Shards.Len() == d.N) &&
		d.Order <= TorchLegacy && (d.Order == Uniform || d.Shards == nil) && d.checkWeights() == nil
}

// NumSamples returns how many positions each rank gets per epoch:
// ⌊N/World⌋ with DropLast, ⌈N/World⌉ without. It is 0 when d is invalid.
func (d Distributed) NumSamples() int64 { return d.NumSamplesFrom(0) }

// NumSamplesFrom returns how many positions each rank gets in the rest of
// an epoch whose first off entries another world already consumed (an
// elastic resume, see EpochFrom): NumSamples of the EpochLen()-off
// remaining entries. It is 0 when d is invalid or off is outside [0,
// EpochLen()].
func (d Distributed) NumSamplesFrom(off int64) int64 {
	if !d.valid() || off < 0 || off > d.EpochLen() {
		return 0
	}
	r, w := d.EpochLen()-off, int64(d.World)
	q := r / w
	if !d.DropLast && r%w != 0 {
		q++
	}
	return q
}

// TotalSize returns NumSamples()·World, the length of the padded or
// truncated epoch list that the ranks share.
func (d Distributed) TotalSize() int64 { return d.NumSamples() * int64(d.World) }

// Padding returns how many positions repeat an earlier index of the epoch
// order (0 with DropLast): the first Padding() entries of the order appear
// twice across the ranks (more often when Padding() > N).
func (d Distributed) Padding() int64 {
	if d.DropLast || !d.valid() {
		return 0
	}
	return d.TotalSize() - d.EpochLen()
}

// Dropped returns how many indices of each epoch no rank sees (DropLast
// only; at most World-1): the last Dropped() entries of the epoch order.
func (d Distributed) Dropped() int64 {
	if !d.DropLast || !d.valid() {
		return 0
	}
	return d.EpochLen() - d.TotalSize()
}

// Epoch returns the rank's plan for epoch e. An invalid d gives an empty
// plan; call Validate first.
func (d Distributed) Epoch(e int64) Epoch { return d.EpochFrom(e, 0) }

// EpochFrom returns the rank's plan for the rest of epoch e after its
// first off entries (of the order every rank shares) were consumed, by
// this world or another: the elastic resume of docs/RESUME.md. The rest
// is split as a whole epoch is, over the list order[(off+j) mod N] for
// j = 0, 1, …: padded by wrapping to the epoch's start (without
// DropLast), or cut to a multiple of World (with it); rank r takes j = r,
// r+World, … So EpochFrom(e, 0) is Epoch(e), and for off = k·B·World
// (every rank of this world at batch k) rank r's plan is its Epoch(e)
// plan from position k·B on, padding included. An invalid d or off
// outside [0, EpochLen()] gives an empty plan. For weighted draws
// (Weights) the list is the epoch's EpochLen() draws, not an order.
func (d Distributed) EpochFrom(e, off int64) Epoch {
	if !d.valid() || off < 0 || off > d.EpochLen() {
		return Epoch{}
	}
	ep := Epoch{
		n:       uint64(d.EpochLen()),
		off:     uint64(off),
		rank:    uint64(d.Rank),
		world:   uint64(d.World),
		len:     d.NumSamplesFrom(off),
		shuffle: d.Shuffle,
	}
	switch {
	case d.Shuffle && d.Weights != nil:
		ep.weights, ep.key = d.Weights, WeightsKey(d.Seed, e)
	case d.Shuffle && d.Order.torch():
		// DistributedSampler seeds with seed + epoch (Python integers,
		// of which torch's engine keeps the low 32 bits).
		ep.torch = torchEpoch(d.N, d.Seed+uint64(e), d.Order == TorchLegacy)
	case d.Shuffle:
		ep.perm = NewPerm(d.N, EpochKey(d.Seed, e))
		ep.shards = d.Shards.epoch(EpochKey(d.Seed, e))
	}
	return ep
}

// Epoch is one rank's plan for one epoch: an immutable value that computes
// each position's dataset index on demand.
type Epoch struct {
	perm    Perm
	n       uint64
	off     uint64 // global entries consumed before this plan (EpochFrom)
	rank    uint64
	world   uint64
	len     int64
	shuffle bool
	shards  *shardEpoch // shard-shuffle order (Distributed.Shards); nil: perm
	torch   *torchPerm  // torch's order (Distributed.Order); nil: perm
	weights *Weights    // weighted draws (Distributed.Weights), keyed by key
	key     uint64
}

// Len returns the number of positions.
func (e Epoch) Len() int64 { return e.len }

// At returns the dataset index at rank-local position pos, or -1 when pos is
// outside [0, Len()). Position p is global position g = Off + Rank +
// p·World of the padded list, whose entry is order[g mod N].
func (e Epoch) At(pos int64) int64 {
	if pos < 0 || pos >= e.len {
		return -1
	}
	return e.index(e.global(pos))
}

// Draws reports whether the plan is weighted draws with replacement
// (Distributed.Weights), in which one dataset index may come up at
// several positions of an epoch.
func (e Epoch) Draws() bool { return e.weights != nil }

// Entry returns which entry of the epoch's list rank-local position pos
// takes (reduced mod the list's length, as padding wraps), or -1 when
// pos is outside [0, Len()). For draws it tells repeats of one index
// apart: the loader keys their augmentation by it.
func (e Epoch) Entry(pos int64) int64 {
	if pos < 0 || pos >= e.len {
		return -1
	}
	return int64(e.global(pos))
}

// global returns the order position of rank-local position pos, reduced
// mod N. No overflow: off ≤ N ≤ 2^62 and rank + pos·world < 2N.
func (e Epoch) global(pos int64) uint64 {
	g := e.off + e.rank + uint64(pos)*e.world
	if g >= e.n {
		g %= e.n
	}
	return g
}

func (e Epoch) index(g uint64) int64 {
	if e.weights != nil {
		return e.weights.Draw(e.key, int64(g))
	}
	if e.torch != nil {
		return e.torch.at(g)
	}
	if e.shards != nil {
		return e.shards.at(int64(g))
	}
	if e.shuffle {
		return e.perm.At(int64(g))
	}
	return int64(g)
}

// Fill writes the indices of positions start, start+1, … into dst and
// returns the filled prefix: min(len(dst), Len()-start) entries, none when
// start is outside [0, Len()). It allocates nothing.
func (e Epoch) Fill(dst []int64, start int64) []int64 {
	if start < 0 || start >= e.len {
		return dst[:0]
	}
	k := min(int64(len(dst)), e.len-start)
	dst = dst[:k]
	g := e.global(start)
	if e.weights != nil {
		for i := range dst {
			dst[i] = e.weights.Draw(e.key, int64(g))
			g = e.step(g)
		}
		return dst
	}
	if e.torch != nil {
		for i := range dst {
			dst[i] = e.torch.at(g)
			g = e.step(g)
		}
		return dst
	}
	if e.shards != nil {
		for i := range dst {
			dst[i] = e.shards.at(int64(g))
			g = e.step(g)
		}
		return dst
	}
	if !e.shuffle {
		for i := range dst {
			dst[i] = int64(g)
			g = e.step(g)
		}
		return dst
	}
	var x [4]uint64
	i := 0
	for ; i+4 <= len(dst); i += 4 {
		for j := range x {
			x[j] = g
			g = e.step(g)
		}
		e.perm.at4(&x)
		for j, v := range x {
			dst[i+j] = int64(v)
		}
	}
	for ; i < len(dst); i++ {
		dst[i] = e.perm.At(int64(g))
		g = e.step(g)
	}
	return dst
}

// step advances global position g by one rank-local position, wrapping.
func (e Epoch) step(g uint64) uint64 {
	g += e.world
	if g >= e.n {
		g %= e.n
	}
	return g
}
