package folder

import "github.com/loaderd/loaderd/loader"

// With size=any a folder of images of varying size (an ImageNet-style
// train/ directory) is a loader.SizedSource: its Spec is 0×0×3 and each
// sample is decoded at its own size, or at the DCT scale the pipeline
// asks for.

// MaxPixels implements loader.SizedSource: maxpixels=.
func (f *source) MaxPixels() int64 { return f.dec.MaxPixels() }

// SampleSized implements loader.SizedSource.
func (f *source) SampleSized(i int64, scratch []byte, scale loader.Scaler) (label int32, pix []byte, h, w, d int, err error) {
	if i < 0 || i >= f.Len() {
		return 0, nil, 0, 0, 0, &loader.RecordError{File: f.root, Record: i, Err: loader.ErrIndex}
	}
	name := f.Path(i)
	buf := f.getBuf()
	defer f.bufs.Put(buf)
	data, err := readFileInto(name, buf, f.maxBytes)
	if err == nil {
		if pix, h, w, d, err = f.dec.DecodeSized(data, scratch, scale); err == nil {
			return f.labels[i], pix, h, w, d, nil
		}
	}
	return 0, nil, 0, 0, 0, &loader.RecordError{File: name, Record: -1, Err: err}
}

var _ loader.SizedSource = (*source)(nil)
