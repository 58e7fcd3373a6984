package client

import (
	"fmt"

	"github.com/loaderd/loaderd/client/sample"
)

// Mix returns what the stream's batch ops (an augment spec ending with
// mixup or cutmix) drew for this batch: Data is already mixed. It is the
// zero Mix (sample.NoMix) on a stream without them (Header().BatchMix
// false).
func (b *Batch) Mix() sample.Mix { return b.mix }

// SoftLabels writes the batch's soft labels into dst: Len() rows of
// Header().NumClasses float32 values, row i being Mix().Lambda of sample
// i's class and 1-Lambda of sample i-1's (the last sample's for row 0),
// in float32 as torchvision computes them; a one-hot row on a stream
// without mixing. dst must hold Len()·NumClasses values; SoftLabels
// allocates nothing.
func (b *Batch) SoftLabels(dst []float32) error {
	classes := int(b.s.Header().GetNumClasses())
	if classes <= 0 {
		return fmt.Errorf("client: the daemon did not say the dataset's number of classes (an older daemon?)")
	}
	if err := b.mix.SoftLabels(dst, b.Labels, classes); err != nil {
		return fmt.Errorf("client: batch %d: %w", b.Seq, err)
	}
	return nil
}

// Len returns the number of samples in the batch.
func (b *Batch) Len() int { return len(b.Labels) }
