package sampler

import (
	"errors"
	"fmt"
	"math"
)

// Batching errors returned by NewCursor, Seek and SetEpochs.
var (
	ErrBatchSize = errors.New("sampler: batch size below 1")
	ErrNoBatches = errors.New("sampler: epoch has no batches")
	ErrPosition  = errors.New("sampler: position out of range")
	ErrEpochs    = errors.New("sampler: negative epoch limit")
)

// Position is a resume point: batch Batch of epoch Epoch.
//
// Offset is 0 but after an elastic resume (docs/RESUME.md): then the
// first Offset entries of the epoch's order were consumed before this
// world's plan of the epoch began (Distributed.EpochFrom), and Batch counts
// batches of the rest, of which each rank has
// Distributed.BatchesFrom(Offset, …). It belongs to Epoch alone: the next
// epoch starts at Offset 0. The zero Offset keeps older encodings (JSON
// without the field) meaning what they meant.
type Position struct {
	Epoch, Batch int64
	Offset       int64 `json:",omitempty"`
}

// String formats p as "epoch E batch B", adding " after offset G" when
// Offset is not 0.
func (p Position) String() string {
	if p.Offset != 0 {
		return fmt.Sprintf("epoch %d batch %d after offset %d", p.Epoch, p.Batch, p.Offset)
	}
	return fmt.Sprintf("epoch %d batch %d", p.Epoch, p.Batch)
}

// Next returns the position after p when p's epoch (from p.Offset) has
// perEpoch batches; the next epoch starts at Offset 0.
func (p Position) Next(perEpoch int64) Position {
	if p.Batch+1 >= perEpoch {
		return Position{Epoch: p.Epoch + 1}
	}
	return Position{Epoch: p.Epoch, Batch: p.Batch + 1, Offset: p.Offset}
}

// Seq returns p's sequence number, counting batches from {0, 0}, when
// every epoch has perEpoch batches (Offset is ignored).
func (p Position) Seq(perEpoch int64) int64 { return p.Epoch*perEpoch + p.Batch }

// PositionAt is the inverse of Position.Seq. perEpoch must be positive.
func PositionAt(seq, perEpoch int64) Position {
	if perEpoch <= 0 {
		return Position{}
	}
	return Position{Epoch: seq / perEpoch, Batch: seq % perEpoch}
}

// Batches returns the number of batches of size bs per epoch for n
// positions: ⌊n/bs⌋ with dropLast, ⌈n/bs⌉ without. It is 0 when n ≤ 0 or
// bs ≤ 0.
func Batches(n int64, bs int, dropLast bool) int64 {
	if n <= 0 || bs <= 0 {
		return 0
	}
	b := n / int64(bs)
	if !dropLast && n%int64(bs) != 0 {
		b++
	}
	return b
}

// Cursor walks one rank's batches across epochs from a start Position, so
// that a stream resumed at (epoch, batch) continues the exact sequence of an
// uninterrupted one. A Cursor is not safe for concurrent use.
type Cursor struct {
	d             Distributed
	bs            int64
	dropLastBatch bool
	perEpoch      int64
	end           int64    // first epoch not produced
	pos           Position // next batch to produce
	ep            Epoch
	epNum         int64 // epoch that ep plans; -1 for none
	epOff         int64 // and the offset it plans from
}

// NewCursor returns a cursor over d's batches of size bs (the last, short
// batch of each epoch is dropped when dropLastBatch is set) whose first
// batch is start. It walks endlessly until SetEpochs limits it. start.Batch
// may equal the number of batches per epoch, meaning the next epoch's start.
func NewCursor(d Distributed, bs int, dropLastBatch bool, start Position) (*Cursor, error) {
	var errs []error
	if err := d.Validate(); err != nil {
		errs = append(errs, err)
	}
	if bs < 1 {
		errs = append(errs, fmt.Errorf("%w: %d", ErrBatchSize, bs))
	}
	if errs != nil {
		return nil, errors.Join(errs...)
	}
	c := &Cursor{
		d:             d,
		bs:            int64(bs),
		dropLastBatch: dropLastBatch,
		perEpoch:      Batches(d.NumSamples(), bs, dropLastBatch),
		end:           math.MaxInt64,
		epNum:         -1,
	}
	if c.perEpoch == 0 {
		return nil, fmt.Errorf("%w: %d samples per rank, batch size %d, drop last batch %t",
			ErrNoBatches, d.NumSamples(), bs, dropLastBatch)
	}
	if err := c.Seek(start); err != nil {
		return nil, err
	}
	return c, nil
}

// Seek moves the cursor so that the next batch is p. p.Batch may equal
// the number of batches from p.Offset, meaning the next epoch's start.
func (c *Cursor) Seek(p Position) error {
	if p.Epoch < 0 || p.Offset < 0 || p.Offset > c.d.EpochLen() {
		return fmt.Errorf("%w: %v, epoch of %d", ErrPosition, p, c.d.EpochLen())
	}
	n := c.batchesAt(p)
	if p.Batch < 0 || p.Batch > n {
		return fmt.Errorf("%w: %v, %d batches in the epoch", ErrPosition, p, n)
	}
	if p.Batch == n {
		p = Position{Epoch: p.Epoch + 1}
	}
	c.pos = p
	return nil
}

// batchesAt returns the batches of p's epoch from p.Offset on.
func (c *Cursor) batchesAt(p Position) int64 {
	if p.Offset == 0 {
		return c.perEpoch
	}
	return Batches(c.d.NumSamplesFrom(p.Offset), int(c.bs), c.dropLastBatch)
}

// SetEpochs makes the cursor stop before epoch n, so a run of n epochs
// covers epochs 0..n-1 whatever its start. n == 0 means endless.
func (c *Cursor) SetEpochs(n int64) error {
	if n < 0 {
		return fmt.Errorf("%w: %d", ErrEpochs, n)
	}
	if n == 0 {
		n = math.MaxInt64
	}
	c.end = n
	return nil
}

// Pos returns the position of the next batch: the resume point to record.
func (c *Cursor) Pos() Position { return c.pos }

// PerEpoch returns the number of batches in each whole epoch (an epoch
// resumed at an offset has Distributed.BatchesFrom batches).
func (c *Cursor) PerEpoch() int64 { return c.perEpoch }

// Next fills dst with the dataset indices of the next batch and returns its
// position and the filled slice; ok is false once the epoch limit is
// reached. It allocates nothing when cap(dst) is at least the batch size.
func (c *Cursor) Next(dst []int64) (pos Position, idx []int64, ok bool) {
	if c.pos.Epoch >= c.end {
		return c.pos, dst[:0], false
	}
	if c.epNum != c.pos.Epoch || c.epOff != c.pos.Offset {
		c.ep = c.d.EpochFrom(c.pos.Epoch, c.pos.Offset)
		c.epNum, c.epOff = c.pos.Epoch, c.pos.Offset
	}
	start := c.pos.Batch * c.bs
	n := min(c.bs, c.ep.Len()-start)
	if int64(cap(dst)) < n {
		dst = make([]int64, n)
	}
	idx = c.ep.Fill(dst[:n], start)
	pos = c.pos
	c.pos = c.pos.Next(c.batchesAt(c.pos))
	return pos, idx, true
}
