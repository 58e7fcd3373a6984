package parquet

import "github.com/loaderd/loaderd/loader"

// With size=any a Parquet file of images of varying size (a Hugging Face
// ImageNet-style dataset) is a loader.SizedSource: its Spec is 0×0×3 and
// each row is decoded at its own size, or at the DCT scale the pipeline
// asks for, by the same imagedec path as the tar and folder formats.

// MaxPixels implements loader.SizedSource: maxpixels=.
func (p *source) MaxPixels() int64 { return p.dec.MaxPixels() }

// SampleSized implements loader.SizedSource.
func (p *source) SampleSized(i int64, scratch []byte, scale loader.Scaler) (label int32, pix []byte, h, w, d int, err error) {
	data, label, err := p.encoded(i)
	if err != nil {
		return 0, nil, 0, 0, 0, err
	}
	if pix, h, w, d, err = p.dec.DecodeSized(data, scratch, scale); err != nil {
		return 0, nil, 0, 0, 0, p.recordError(i, err)
	}
	return label, pix, h, w, d, nil
}

var _ loader.SizedSource = (*source)(nil)
