package client

import (
	"errors"
	"fmt"

	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
	"github.com/loaderd/loaderd/sampler"
)

// Position returns the batch's position: its epoch, its index, and the
// epoch's elastic-resume offset.
func (b *Batch) Position() sampler.Position {
	return sampler.Position{Epoch: b.Epoch, Batch: b.Index, Offset: b.Offset}
}

// After returns the position after b: where this world resumes once b is
// consumed (what a checkpoint taken after training on b records).
func (s *Stream) After(b *Batch) sampler.Position {
	return s.after(b.Position(), s.Header())
}

// Global returns the world-independent form of p, a position of this
// stream's world (sampler.Distributed.Global): a stream of any world
// opened with Start = Global(p) receives the rest of p's epoch, split
// over that world, and nothing twice. Every rank must pass the same p,
// as data-parallel ranks checkpoint after the same step.
func (s *Stream) Global(p sampler.Position) (sampler.Position, error) {
	h := s.Header()
	g, err := s.sampler(h).Global(p, int(h.GetBatchSize()), s.cfg.DropLastBatch)
	if err != nil {
		return sampler.Position{}, fmt.Errorf("client: %w", err)
	}
	return g, nil
}

func (s *Stream) sampler(h *pb.StreamHeader) sampler.Distributed {
	// An epoch's list as a plain order of its length: a weighted stream's
	// K draws split over ranks as K samples would be.
	n := h.GetEpochSamples()
	if n == 0 { // a daemon older than the field
		n = h.GetDatasetSize()
	}
	return sampler.Distributed{N: n, Rank: s.cfg.Rank, World: s.cfg.World, DropLast: s.cfg.DropLast}
}

// after returns the position after p under header h: the next epoch
// after p's epoch's last batch, counted from p.Offset.
func (s *Stream) after(p sampler.Position, h *pb.StreamHeader) sampler.Position {
	n := h.GetBatchesPerEpoch()
	if p.Offset != 0 {
		n = s.sampler(h).BatchesFrom(p.Offset, int(h.GetBatchSize()), s.cfg.DropLastBatch)
	}
	return p.Next(n)
}

// errNoOffset: a daemon that predates start_offset ignores it and would
// serve the whole start epoch again.
var errNoOffset = errors.New("client: the daemon did not echo start_offset: it is too old for an elastic resume")

// checkStart makes sure the daemon starts where it was asked.
func checkStart(h *pb.StreamHeader, at sampler.Position) error {
	if h.GetStartOffset() != at.Offset {
		if h.GetStartOffset() == 0 {
			return errNoOffset
		}
		return fmt.Errorf("client: asked to start at offset %d, the daemon starts at %d", at.Offset, h.GetStartOffset())
	}
	return nil
}
