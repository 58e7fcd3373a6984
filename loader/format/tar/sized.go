package tar

import (
	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/format/internal/options"
)

// With size=any a tar of images of varying size (an ImageNet-style
// shard) is a loader.SizedSource: its Spec is 0×0×3 and each sample is
// decoded at its own size, or at the DCT scale the pipeline asks for.

// MaxPixels implements loader.SizedSource: maxpixels=, the bound every
// image's header is checked against.
func (t *source) MaxPixels() int64 { return t.dec.MaxPixels() }

// SampleSized implements loader.SizedSource.
func (t *source) SampleSized(i int64, scratch []byte, scale loader.Scaler) (label int32, pix []byte, h, w, d int, err error) {
	if i < 0 || i >= t.Len() {
		return 0, nil, 0, 0, 0, &loader.RecordError{File: t.path, Record: i, Err: loader.ErrIndex}
	}
	if size := t.samples[i].size; size > t.max {
		return 0, nil, 0, 0, 0, &loader.RecordError{File: t.name(i), Record: -1, Err: options.TooLarge(size, t.max)}
	}
	data, bp, err := t.member(i)
	if err != nil {
		return 0, nil, 0, 0, 0, t.readErr(i, err)
	}
	pix, h, w, d, err = t.dec.DecodeSized(data, scratch, scale)
	release(bp)
	if err != nil {
		return 0, nil, 0, 0, 0, &loader.RecordError{File: t.name(i), Record: -1, Err: err}
	}
	return t.samples[i].label, pix, h, w, d, nil
}

var _ loader.SizedSource = (*source)(nil)
