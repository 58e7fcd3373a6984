package loader

import (
	"sync"
	"sync/atomic"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/pinned"
)

// Batch is one filled batch. Its slices stay valid until Release; after
// that the Loader reuses them for a later batch.
type Batch struct {
	Seq     int64           // position in the stream, from 0
	Epoch   int64           // epoch of every sample in the batch
	Index   int64           // batch index within the epoch (from Offset)
	Offset  int64           // the epoch's global start offset (sampler.Position.Offset); 0 but in an elastically resumed start epoch
	Indices []int64         // dataset index of each sample (under SkipOnError, of its substitute)
	Labels  []int32         // label of each sample
	Params  []sample.Params // each sample's random choices; nil unless Config.WithParams
	Mix     sample.Mix      // what the pipeline's batch ops (mixup, cutmix) drew; zero without them
	Spec    augment.Spec    // one sample's output
	Data    []byte          // len(Indices) samples of Spec.Bytes(), back to back
	Slot    *pinned.Slot    // the pinned slot Data lives in

	l        *Loader
	idx      []int64 // full-size backing arrays
	labels   []int32
	params   []sample.Params
	keys     []int64      // augmentation keys of weighted draws (planAt); nil for an order
	mixTmp   []byte       // one sample, for the batch ops (mix.go); nil without them
	fields   batchFields  // extra fields and label sets (fields.go)
	assigned int          // samples handed to workers (guarded by Pool.mu)
	pending  atomic.Int32 // samples not yet written
	busyNs   atomic.Int64 // worker time spent on its chunks (busy.go)
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

// fill runs one chunk: read, augment and write each sample into the batch,
// with the worker's buffers (grown if the source needs more).
func (l *Loader) fill(c chunk, wk *worker) {
	defer l.busy.Done()
	b := c.b
	need := l.src.Spec().Bytes()
	var src Source = l.src
	if ss := l.sized; ss != nil {
		need = int(ss.MaxPixels()) * l.src.Spec().C
		wk.sized.SizedSource = ss
		src = &wk.sized
	}
	if cap(wk.scratch) < need {
		wk.scratch = make([]byte, need)
	}
	scratch := wk.scratch[:need]
	for k := c.lo; k < c.hi; {
		if k = l.fillRange(b, k, c.hi, src, wk, scratch); k < c.hi {
			// Sample k faulted (see fault.go): read it again, alone and
			// guarded, which makes it an error for the policy to handle.
			// (Had a skip already been counted for it, it is counted
			// again: a rare double count, not a lost sample.)
			l.fillOne(b, k, guarded{src}, wk, scratch)
			k++
		}
	}
	wk.chunkDone(b)
	if b.pending.Add(-int32(c.hi-c.lo)) == 0 {
		l.checkFields(b)
		l.mixBatch(b) // the last chunk's worker: every sample is written
		b.done <- struct{}{}
	}
}

// fillRange fills samples [k, hi) of b and returns hi, or, when reading
// sample k faulted inside a file mapping, stops there and returns k. Its
// one deferred recover covers the whole range: the hot path pays for it
// once per chunk.
func (l *Loader) fillRange(b *Batch, k, hi int, src Source, wk *worker, scratch []byte) (stop int) {
	defer func() {
		if r := recover(); r != nil {
			if _, _, ok := mappedFault(r); !ok {
				panic(r)
			}
			stop = k
		}
	}()
	for ; k < hi; k++ {
		l.fillOne(b, k, src, wk, scratch)
	}
	return hi
}

// fillOne reads sample k of b from src under the error policy, augments
// it into its place in the slot, and records its index and label.
func (l *Loader) fillOne(b *Batch, k int, src Source, wk *worker, scratch []byte) {
	// The planned index: Indices[k] is written last, so a sample that
	// faulted and is read again starts from the same plan.
	idx := b.Indices[k]
	key := idx // what the sample's augmentation is drawn for
	if b.keys != nil {
		key = b.keys[k]
	}
	wk.sized.want.plan(l.pipe, l.cfg.Seed, b.Epoch, key)
	used, label, pix, err := l.skip.Sample(src, b.Epoch, b.Index, idx, scratch)
	if err == nil {
		// Keyed by the planned index: a substitute is augmented as the
		// sample it stands in for would have been.
		out := l.outBytes
		dst := b.Data[k*out : (k+1)*out]
		var prm sample.Params
		if r := &wk.sized; r.SizedSource != nil {
			// Drawn for the image's size as the source read it, and
			// applied to what the source says it decoded.
			d := r.dec
			prm = r.want.params(d.H, d.W)
			err = l.pipe.ApplyDecoded(dst, pix, d.H, d.W, d.Scale, d.Box, prm, &wk.aug)
		} else {
			prm = l.pipe.Draw(l.cfg.Seed, b.Epoch, key)
			err = l.pipe.Apply(dst, pix, prm)
		}
		if b.Params != nil {
			b.Params[k] = prm
		}
	}
	if l.fields != nil {
		if ferr := l.fillFields(b, k, used, err != nil); ferr != nil && err == nil {
			err = ferr
		}
	}
	if err != nil {
		b.fail(&SampleError{Epoch: b.Epoch, Batch: b.Index, Index: idx, Err: err})
		label = -1
	}
	b.Indices[k], b.Labels[k] = used, label
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
