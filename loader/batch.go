package loader

import (
	"sync"
	"sync/atomic"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/pinned"
)

// Batch is one filled batch. Its slices stay valid until Release; after
// that the Loader reuses them for a later batch.
type Batch struct {
	Seq     int64            // position in the stream, from 0
	Epoch   int64            // epoch of every sample in the batch
	Index   int64            // batch index within the epoch
	Indices []int64          // dataset index of each sample (under SkipOnError, of its substitute)
	Labels  []int32          // label of each sample
	Params  []augment.Params // each sample's random choices; nil unless Config.WithParams
	Spec    augment.Spec     // one sample's output
	Data    []byte           // len(Indices) samples of Spec.Bytes(), back to back
	Slot    *pinned.Slot     // the pinned slot Data lives in

	l        *Loader
	idx      []int64 // full-size backing arrays
	labels   []int32
	params   []augment.Params
	assigned int          // samples handed to workers (guarded by Pool.mu)
	pending  atomic.Int32 // samples not yet written
	done     chan struct{}
	errMu    sync.Mutex
	err      error
	held     bool // delivered to the consumer, not yet released (guarded by Loader.mu)
}

// Len returns the number of samples in the batch.
func (b *Batch) Len() int { return len(b.Indices) }

// Sample returns the bytes of sample k.
func (b *Batch) Sample(k int) []byte {
	n := b.Spec.Bytes()
	return b.Data[k*n : (k+1)*n]
}

// Release hands the batch back to its Loader for reuse.
func (b *Batch) Release() error { return b.l.Release(b) }

func (b *Batch) fail(err error) {
	b.errMu.Lock()
	if b.err == nil {
		b.err = err
	}
	b.errMu.Unlock()
}

// fill runs one chunk: read, augment and write each sample into the batch.
// It returns scratch, grown if the source needed more.
func (l *Loader) fill(c chunk, scratch []byte) []byte {
	defer l.busy.Done()
	b := c.b
	need := l.src.Spec().Bytes()
	if cap(scratch) < need {
		scratch = make([]byte, need)
	}
	scratch = scratch[:need]
	out := l.outBytes
	for k := c.lo; k < c.hi; k++ {
		idx := b.Indices[k]
		used, label, pix, err := l.skip.Sample(l.src, b.Epoch, b.Index, idx, scratch)
		b.Indices[k] = used
		if err == nil {
			// Keyed by the planned index: a substitute is augmented as the
			// sample it stands in for would have been.
			prm := l.pipe.Draw(l.cfg.Seed, b.Epoch, idx)
			if b.Params != nil {
				b.Params[k] = prm
			}
			err = l.pipe.Apply(b.Data[k*out:(k+1)*out], pix, prm)
		}
		if err != nil {
			b.fail(&SampleError{Epoch: b.Epoch, Batch: b.Index, Index: idx, Err: err})
			label = -1
		}
		b.Labels[k] = label
	}
	if b.pending.Add(-int32(c.hi-c.lo)) == 0 {
		b.done <- struct{}{}
	}
	return scratch
}

// nextChunkLocked hands out the next chunk of the oldest queued batch.
// The caller holds Pool.mu.
func (l *Loader) nextChunkLocked() chunk {
	b := l.queue[l.qhead]
	lo := b.assigned
	hi := min(lo+chunkSize, len(b.Indices))
	b.assigned = hi
	if hi == len(b.Indices) {
		l.queue[l.qhead] = nil
		l.qhead = (l.qhead + 1) % len(l.queue)
		l.qlen--
	}
	return chunk{b: b, lo: lo, hi: hi}
}
