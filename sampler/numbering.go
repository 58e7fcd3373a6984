package sampler

// Numbering counts a stream's batches from its start: batch number k is
// the k-th batch a stream opened at Start delivers, across epochs. It is
// how a client that spreads one rank's stream over several daemons names
// a batch to each (loaderd.v1.Want): daemon and client derive the same
// Numbering from the same Open, so number k is the same batch everywhere.
type Numbering struct {
	Start    Position // the stream's first batch
	First    int64    // batches of Start's epoch from Start on; 0 when none is left
	PerEpoch int64    // batches of every later epoch (positive)
	End      int64    // first epoch not streamed; 0 is endless
}

// NewNumbering numbers the batches of a stream that starts at start, whose
// start epoch has startEpoch batches from start.Offset on (perEpoch when
// start.Offset is 0), whose later epochs have perEpoch, and which ends
// before epoch end (0: endless).
func NewNumbering(start Position, startEpoch, perEpoch, end int64) Numbering {
	return Numbering{Start: start, First: max(startEpoch-start.Batch, 0), PerEpoch: perEpoch, End: end}
}

// At returns the position of batch number k, and false when k is negative
// or past the stream's end.
func (n Numbering) At(k int64) (Position, bool) {
	if k < 0 || n.PerEpoch <= 0 {
		return Position{}, false
	}
	var p Position
	if k < n.First {
		p = Position{Epoch: n.Start.Epoch, Batch: n.Start.Batch + k, Offset: n.Start.Offset}
	} else {
		k -= n.First
		p = Position{Epoch: n.Start.Epoch + 1 + k/n.PerEpoch, Batch: k % n.PerEpoch}
	}
	if n.End > 0 && p.Epoch >= n.End {
		return Position{}, false
	}
	return p, true
}

// Len returns the number of batches in the stream, or -1 when it is
// endless.
func (n Numbering) Len() int64 {
	if n.End <= 0 {
		return -1
	}
	if n.End <= n.Start.Epoch {
		return 0
	}
	return n.First + (n.End-n.Start.Epoch-1)*n.PerEpoch
}
