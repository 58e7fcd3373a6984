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
	// SampleSized reads sample i into scratch as Sample does, and says
	// what it decoded: the image's full size, the DCT scale and the
	// region of the image pix holds (see Decoded). want, when not nil, is
	// asked once, with the full size from the image's header and before
	// anything is decoded, what the caller wants of it (see Want); a
	// source may give less (scale 1, the whole image), never more, and
	// the Decoded it returns is the only account of what it gave. Sample
	// of a SizedSource decodes the whole image at scale 1.
	SampleSized(i int64, scratch []byte, want Scaler) (label int32, pix []byte, dec Decoded, err error)
}

// VaryingSizeFix says what to do when images of varying size meet a
// pipeline that takes one size: the chain must resample each image to
// one size itself (torchvision's transforms for photographs), or the
// dataset must stretch every image to one size as it decodes it (which
// changes the aspect ratio, so it is the second choice).
const VaryingSizeFix = "start augment with resize=N, center_crop=N or random_resized_crop=N " +
	"(e.g. random_resized_crop=224,flip=0.5,normalize=imagenet,out=f32:chw), " +
	"or open the dataset with ?size=WxH&resize=bilinear to stretch every image to one size"

// Want is what a caller of SampleSized wants of one image, decided from
// the image's full size alone: plain data, for the source to act on.
type Want struct {
	// Scale is the largest DCT scaling denominator the caller can use:
	// 1 (or 0), 2, 4 or 8. A source may decode at it or at 1.
	Scale int
	// Crop, when not empty, is the only region of the full-size image
	// the caller reads (a random resized crop's box). A source that
	// decodes at scale 1 may decode that region alone.
	Crop sample.Box
}

// Scaler says what a caller wants of each image (see SizedSource). Want
// must be a function of the size alone: a source may ask it or not, and
// what it decoded is in the Decoded it returns, never in whether or how
// it asked. It is an interface, not a func, so that a worker passes its
// own state without allocating.
type Scaler interface {
	Want(h, w int) Want
}

// Decoded is what a SampleSized gave: the image's full size from its
// header, the DCT scaling denominator it was decoded at, and the region
// of the full-size image that pix holds, in full-size pixels. pix holds
// the whole image, augment.ScaledSize(H, W, Scale) pixels, when Box is
// the whole image (Whole); otherwise Box is the Want's Crop, decoded at
// Scale 1, Box.W·Box.H pixels.
type Decoded struct {
	H, W  int
	Scale int
	Box   sample.Box
}

// WholeImage returns the Decoded of an h×w image decoded whole at 1/d.
func WholeImage(h, w, d int) Decoded {
	return Decoded{H: h, W: w, Scale: d, Box: sample.Box{W: int32(w), H: int32(h)}}
}

// Whole reports whether pix holds the whole image.
func (d Decoded) Whole() bool { return d.Box == sample.Box{W: int32(d.W), H: int32(d.H)} }

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
// fault guard, which call Sample: it reads the sample with the worker's
// request and keeps what the source says it decoded, for fillOne.
type sizedReader struct {
	SizedSource
	want sizedWant
	dec  Decoded // what the last read decoded
}

// sizedWant is the request a worker passes with every SampleSized: for an
// h×w image, the DCT scale and the crop box of the params the pipeline
// draws for (seed, epoch, planned index, h, w). Its Want is a function
// of the size; it keeps its last draw only so that fillOne need not draw
// again for the size the source reports (params).
type sizedWant struct {
	pipe       *augment.Pipeline // nil: the whole image at scale 1 (Reader.Read without a pipeline)
	seed       uint64
	epoch, idx int64 // the planned sample's augmentation key (fillOne): substitutes are augmented as it
	h, w       int   // the size prm was drawn for; 0 before any
	prm        sample.Params
}

// plan sets the sample the next reads stand for.
func (q *sizedWant) plan(pipe *augment.Pipeline, seed uint64, epoch, idx int64) {
	q.pipe, q.seed, q.epoch, q.idx, q.h, q.w = pipe, seed, epoch, idx, 0, 0
}

// params returns the params of the planned sample for an h×w image.
func (q *sizedWant) params(h, w int) sample.Params {
	if h != q.h || w != q.w || h == 0 {
		q.prm = q.pipe.DrawSized(q.seed, q.epoch, q.idx, h, w)
		q.h, q.w = h, w
	}
	return q.prm
}

// Want implements Scaler.
func (q *sizedWant) Want(h, w int) Want {
	if q.pipe == nil {
		return Want{}
	}
	prm := q.params(h, w)
	box, _ := q.pipe.CropBox(prm)
	return Want{Scale: q.pipe.Scale(h, w, prm), Crop: box}
}

// Sample implements Source through SampleSized.
func (r *sizedReader) Sample(i int64, scratch []byte) (int32, []byte, error) {
	label, pix, dec, err := r.SizedSource.SampleSized(i, scratch, &r.want)
	r.dec = dec
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
