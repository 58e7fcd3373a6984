package loader

import (
	"strconv"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
)

// SizedSource is implemented by sources whose images vary in size, such
// as an ImageNet-style folder or tar of JPEGs: their Spec has H = W = 0
// (U8 HWC, C channels) and each sample reports its own size. A stream of
// one needs a pipeline that opens with augment's geometric ops (resize,
// center_crop, random_resized_crop), which map any size to a fixed one.
type SizedSource interface {
	Source
	// MaxPixels bounds h·w of every sample: a worker's scratch holds
	// MaxPixels·C bytes, and a larger image is an error.
	MaxPixels() int64
	// SampleSized reads sample i into scratch as Sample does, and returns
	// the image's full size h×w and the DCT scaling denominator d it was
	// decoded at: pix holds augment.ScaledSize(h, w, d) pixels. scale,
	// when not nil, is asked with the full size from the image's header,
	// before decoding, for the largest d (1, 2, 4 or 8) the caller can
	// use; a source may decode at it or at 1 (a format without scaled
	// decoding). When scale is also a Cropper offering a box and the
	// source decodes at d = 1, it may decode only that box: pix then holds
	// exactly its box.W·box.H·C bytes (a box smaller than the image, so
	// len(pix) tells the two apart). Sample of a SizedSource decodes the
	// whole image at d = 1.
	SampleSized(i int64, scratch []byte, scale Scaler) (label int32, pix []byte, h, w, d int, err error)
}

// Scaler picks the DCT scaling denominator for an h×w image (see
// SizedSource). It is an interface, not a func, so that a worker passes
// its own state without allocating.
type Scaler interface {
	Scale(h, w int) int
}

// Cropper is a Scaler whose caller reads only a box of each image (a
// random resized crop): Crop, asked after Scale for the same image,
// returns the box in full-size pixels and whether there is one. A source
// that can decode just a region (decode-and-crop) then need not decode
// the rest; see SizedSource.
type Cropper interface {
	Scaler
	Crop() (sample.Box, bool)
}

// worker is one pool worker's buffers: the source's scratch, and for a
// SizedSource the resampler's scratch and the sample being read.
type worker struct {
	scratch []byte
	aug     augment.Scratch
	sized   sizedReader
	pool    *Pool
	state   *workerState // the pool's record of this worker's chunk (busy.go)
	start   int64        // pool clock at the current chunk's start
}

// sizedReader adapts a SizedSource to Source for the error policy and the
// fault guard, which call Sample: it draws the sample's params from its
// header's size as the source asks (Scale), keyed by the planned index,
// and keeps the size and scale for fillOne.
type sizedReader struct {
	SizedSource
	l          *Loader
	epoch, idx int64 // the planned sample: substitutes are augmented as it
	prm        sample.Params
	h, w, d    int
	drawn      bool
	cropped    bool // pix holds only prm.Box (ApplyCropped)
}

// Scale implements Scaler.
func (r *sizedReader) Scale(h, w int) int {
	r.prm = r.l.pipe.DrawSized(r.l.cfg.Seed, r.epoch, r.idx, h, w)
	r.h, r.w, r.drawn = h, w, true
	return r.l.pipe.Scale(h, w, r.prm)
}

// Crop implements Cropper: the box of a random resized crop.
func (r *sizedReader) Crop() (sample.Box, bool) {
	if !r.drawn {
		return sample.Box{}, false
	}
	return r.l.pipe.CropBox(r.prm)
}

// Sample implements Source through SampleSized.
func (r *sizedReader) Sample(i int64, scratch []byte) (int32, []byte, error) {
	r.drawn = false
	label, pix, h, w, d, err := r.SizedSource.SampleSized(i, scratch, r)
	if err == nil && (!r.drawn || h != r.h || w != r.w) {
		// The source did not ask, or asked for another size.
		r.prm = r.l.pipe.DrawSized(r.l.cfg.Seed, r.epoch, r.idx, h, w)
	}
	r.h, r.w, r.d = h, w, d
	r.cropped = false
	if box, ok := r.l.pipe.CropBox(r.prm); err == nil && ok && d == 1 {
		// A crop is smaller than the image: the length tells which came.
		c := r.l.pipe.In().C
		r.cropped = len(pix) == int(box.W)*int(box.H)*c && len(pix) != h*w*c
	}
	return label, pix, err
}

// Name names sample i as the source does, so that a fault while reading a
// mapped shard still names its member (see faultError); without a Namer
// it is the source and the index.
func (r *sizedReader) Name(i int64) string {
	if n, ok := As[Namer](r.SizedSource); ok {
		return n.Name(i)
	}
	return r.SizedSource.String() + "#" + strconv.FormatInt(i, 10)
}
