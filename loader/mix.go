package loader

import "fmt"

// mixBatch runs the pipeline's batch ops (augment's mixup and cutmix) on
// b once all its samples are written, on the worker that wrote the last
// chunk, before Next can hand b out: the mix is drawn from (seed, epoch,
// rank, batch index), so it is the same whichever worker runs it. A batch
// that already failed is left as it is; Next reports its error.
func (l *Loader) mixBatch(b *Batch) {
	m := l.pipe.Mixer()
	if m == nil {
		return
	}
	b.errMu.Lock()
	failed := b.err != nil
	b.errMu.Unlock()
	if failed {
		return
	}
	mx := m.Draw(l.cfg.Seed, b.Epoch, l.cfg.Rank, b.Index)
	if err := m.Apply(b.Data, b.Len(), mx, b.mixTmp); err != nil {
		b.fail(fmt.Errorf("loader: epoch %d batch %d: %w", b.Epoch, b.Index, err))
		return
	}
	b.Mix = mx
}
