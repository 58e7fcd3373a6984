package sampler

import (
	"errors"
	"fmt"
	"strings"
)

// ErrDisagree reports ranks whose checkpointed positions are not one
// global position (Agree).
var ErrDisagree = errors.New("sampler: ranks' positions disagree")

// BatchesFrom returns how many batches of bs each rank gets in the rest of
// an epoch from global offset off (Batches of NumSamplesFrom(off)); off 0
// gives the whole epoch's count.
func (d Distributed) BatchesFrom(off int64, bs int, dropLastBatch bool) int64 {
	return Batches(d.NumSamplesFrom(off), bs, dropLastBatch)
}

// Global returns the world-independent form of p, a position of d's world
// with batch size bs per rank: {Epoch, 0, G}, where G entries of the
// epoch's order are consumed, or {Epoch+1, 0, 0} when the epoch is done.
// Once every rank of the world has taken k batches from p.Offset, the
// entries taken are exactly the list positions [0, k·bs·World) of the rest
// (rank r took r, r+World, …), so G = p.Offset + k·bs·World, clipped to
// EpochLen() (N but for weighted draws): what lies past it is padding, and a rest whose remaining entries all fall
// into the dropped tail (DropLast) or the dropped short batch is done too.
// Any world continues at G with EpochFrom; d's own world at G receives
// exactly what it would have from p.
func (d Distributed) Global(p Position, bs int, dropLastBatch bool) (Position, error) {
	if err := d.Validate(); err != nil {
		return Position{}, err
	}
	if bs < 1 {
		return Position{}, fmt.Errorf("%w: %d", ErrBatchSize, bs)
	}
	if p.Epoch < 0 || p.Offset < 0 || p.Offset > d.EpochLen() {
		return Position{}, fmt.Errorf("%w: %v, epoch of %d", ErrPosition, p, d.EpochLen())
	}
	n := d.BatchesFrom(p.Offset, bs, dropLastBatch)
	if p.Batch < 0 || p.Batch > n {
		return Position{}, fmt.Errorf("%w: %v, %d batches in the epoch for %d ranks of %d",
			ErrPosition, p, n, d.World, bs)
	}
	taken := min(p.Batch*int64(bs), d.NumSamplesFrom(p.Offset)) // per rank
	g := p.Offset + taken*int64(d.World)
	if p.Batch == n || g >= d.EpochLen() {
		return Position{Epoch: p.Epoch + 1}, nil
	}
	return Position{Epoch: p.Epoch, Offset: g}, nil
}

// Agree returns the global position (Global) of a world whose rank r
// checkpointed ps[r], when all ranks agree on it. Ranks at different
// positions are refused with an error wrapping ErrDisagree: resuming at
// the earliest would train the ranks ahead on their samples again, at the
// latest would lose what the others had not taken, and either way the
// checkpoint was not taken where data-parallel ranks stand together (after
// a step). len(ps) must be d.World.
func (d Distributed) Agree(ps []Position, bs int, dropLastBatch bool) (Position, error) {
	if len(ps) != d.World {
		return Position{}, fmt.Errorf("%w: %d positions for a world of %d", ErrDisagree, len(ps), d.World)
	}
	var first Position
	var desc []string
	same := true
	for r, p := range ps {
		g, err := d.Global(p, bs, dropLastBatch)
		if err != nil {
			return Position{}, fmt.Errorf("rank %d: %w", r, err)
		}
		if r == 0 {
			first = g
		} else if g != first {
			same = false
		}
		desc = append(desc, fmt.Sprintf("rank %d at %v", r, p))
	}
	if !same {
		return Position{}, fmt.Errorf("%w: %s", ErrDisagree, strings.Join(desc, ", "))
	}
	return first, nil
}
