package imagedec

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/loader"
)

// Options are what every format of encoded images takes, as the formats'
// options package parses them from size=, maxpixels=, resize=, maxbytes=
// and decoder=, and the source's name.
type Options struct {
	Format, Path string // the source is FORMAT:PATH; errors about an index name PATH
	// H and W are every image's size (size=); 0 when size= is absent
	// (NewSource probes the first images: see ProbeRecords) or with
	// AnySize.
	H, W int
	// AnySize (size=any): each image at its own size, a loader.SizedSource.
	AnySize bool
	// MaxPixels is the most pixels a header may declare; 0: the default,
	// DefaultMaxPixels, or AnySizeMaxPixels for images of varying size
	// (AnySize, or implied by the probe).
	MaxPixels int64
	// Exact (exact=torchvision) turns off every decode that gives other
	// pixels than PIL's full decode: a JPEG is never decoded at a DCT
	// scale (loader.Want's Scale is ignored), so a stream's resize and
	// random resized crop read the full-size pixels torchvision does.
	// Decoding only a random resized crop's box stays: its pixels are
	// the full decode's.
	Exact bool
	// Probe is how many records NewSource reads the size of when H and
	// W are 0 and not AnySize; 0: ProbeRecords. A format whose every
	// record costs a request (tar's s3:// members) sets 1: the first
	// image's size, and size=any must be said.
	Probe int
	// MaxBytes bounds one encoded image, checked before it is read (or,
	// where its size is not known before, by the format as it reads);
	// 0: DefaultMaxBytes.
	MaxBytes int64
	Resize   bool    // stretch images of another size to H×W
	Backend  Backend // the JPEG decoder
}

// Records is a format's side of a Source: its records, each an encoded
// image with a label, and how to reach one. Len and Classes are
// loader.Source's; the rest is asked only for 0 ≤ i < Len().
type Records interface {
	Len() int64
	Classes() []string
	// LabelOf returns record i's label, read without its image (it may be
	// out of range: Source refuses such a record's sample).
	LabelOf(i int64) int32
	// Where returns the file an error about record i names and the
	// record's number within it, -1 for a file (or archive member) that
	// holds it alone: loader.RecordError's File and Record. The record's
	// name (loader.Namer) is FILE, or FILE#RECORD.
	Where(i int64) (file string, record int64)
	// SizeOf returns the size of record i's encoded image in bytes when
	// it is known before reading it, -1 when not (the format then checks
	// maxbytes= as it reads: TooLarge).
	SizeOf(i int64) int64
	// Encoded returns record i's encoded image: a view of memory the
	// format holds, or a buffer it read into. hold, when not nil, is
	// released once the image is decoded (a pooled buffer, a shard's
	// mapping kept in use). Errors are the record's: ErrNull for a
	// record with no image, loader.ErrClosed after Close, a read error;
	// Source names the record in them.
	Encoded(i int64) (data []byte, hold Hold, err error)
	// Close releases the format's files.
	Close() error
}

// Hold is what a record's bytes keep in use until they are decoded.
type Hold interface{ Release() }

// ErrNull is the error of a record that holds no image (a null cell of a
// table): a corrupt record. A dataset without size= probes the sizes of
// its first records that are not null.
var ErrNull = fmt.Errorf("%w: null image", loader.ErrCorrupt)

// TooLarge is the error for an encoded image of size bytes over limit.
func TooLarge(size, limit int64) error {
	return fmt.Errorf("%w: %d bytes, over maxbytes=%d", ErrTooLarge, size, limit)
}

// Source is a loader.Source of encoded images over a format's Records:
// each Sample reads a record's bytes and decodes them into the worker's
// scratch, with a Pool of decoders. It is a loader.Namer, a
// loader.Labeler (labels without decoding), a loader.DecoderNamer, and
// with size=any a loader.SizedSource. Every error about a record is a
// *loader.RecordError naming it: its file and record (Records.Where), or
// the dataset and the index for an index out of range or a closed
// source; maxbytes= is checked before a record is read.
//
// A format's source type embeds *Source and implements Records itself,
// so that it is the loader.Source, and adds the optional interfaces only
// it can honour (tar's loader.ShardOrderer and loader.Prefetcher). A
// Source is safe for concurrent use as its Records are.
type Source struct {
	recs     Records
	opt      Options
	pool     *Pool
	maxBytes int64
	classes  int // len(Classes()): labels at or over it are refused
}

// ProbeRecords is how many records NewSource reads the headers of when
// a dataset declares no size: the first ProbeRecords that are not null.
// The dataset is opened before any stream says its pipeline, so the
// choice is made there, once, from what a few headers cost (a photograph
// collection differs within its first images; reading every header of a
// million-image tar at open would not be cheap).
const ProbeRecords = 32

// NewSource returns the Source of recs. When opt gives no size and not
// AnySize, it reads the headers of the first ProbeRecords records that
// are not null: if their sizes all agree (CIFAR or Tiny ImageNet as
// JPEGs), that is every image's size; if they differ (a folder or tar of
// photographs), the dataset is of varying size as with size=any, each
// image served at its own size to a pipeline that opens with resize,
// center_crop or random_resized_crop. resize=bilinear keeps the first
// image's size and stretches the others to it.
func NewSource(recs Records, opt Options) (*Source, error) {
	s := &Source{recs: recs, opt: opt, maxBytes: opt.MaxBytes, classes: len(recs.Classes())}
	if s.maxBytes <= 0 {
		s.maxBytes = DefaultMaxBytes
	}
	h, w := opt.H, opt.W
	if !opt.AnySize && h == 0 {
		var varying bool
		var err error
		if h, w, varying, err = s.probeSize(cmp.Or(opt.MaxPixels, DefaultMaxPixels)); err != nil {
			return nil, err
		}
		if varying && !opt.Resize {
			s.opt.AnySize = true
		}
	}
	if s.opt.AnySize {
		h, w = 0, 0
	}
	maxPx := opt.MaxPixels
	switch {
	case maxPx > 0:
	case s.opt.AnySize:
		maxPx = AnySizeMaxPixels // a worker's scratch holds one
	default:
		maxPx = DefaultMaxPixels
	}
	s.pool = NewPool(h, w, maxPx, opt.Resize).WithBackend(opt.Backend)
	return s, nil
}

// probeSize reads the size of the first record that is not null, and
// reports whether any of the next records, up to ProbeRecords (or
// opt.Probe) in all, differs from it. Only the first record's errors
// fail the open, as before the probe: a later bad record is skipped here
// and is its sample's error (which --on-error skip may skip).
func (s *Source) probeSize(maxPx int64) (h, w int, varying bool, err error) {
	limit := s.opt.Probe
	if limit <= 0 {
		limit = ProbeRecords
	}
	seen := 0
	for i := int64(0); i < s.recs.Len() && seen < limit && !varying; i++ {
		data, hold, err := s.encoded(i)
		if errors.Is(err, ErrNull) {
			continue
		}
		if err != nil && seen > 0 {
			continue
		}
		if err != nil {
			return 0, 0, false, err
		}
		hi, wi, err := Size(data, maxPx)
		release(hold)
		if err != nil && seen > 0 {
			continue
		}
		if err != nil {
			return 0, 0, false, s.recordError(i, err)
		}
		if seen == 0 {
			h, w = hi, wi
		}
		varying = hi != h || wi != w
		seen++
	}
	if seen == 0 {
		return 0, 0, false, &loader.RecordError{File: s.opt.Path, Record: -1, Err: fmt.Errorf("%w: every image is null", loader.ErrCorrupt)}
	}
	return h, w, varying, nil
}

// Len returns the number of records.
func (s *Source) Len() int64 { return s.recs.Len() }

// Classes returns the class names.
func (s *Source) Classes() []string { return s.recs.Classes() }

// Spec returns H×W×3 U8 HWC, or 0×0×3 with size=any.
func (s *Source) Spec() augment.Spec { return s.pool.Spec() }

// String names the source as FORMAT:PATH.
func (s *Source) String() string { return s.opt.Format + ":" + s.opt.Path }

// Close closes the format's files.
func (s *Source) Close() error { return s.recs.Close() }

// Decoder implements loader.DecoderNamer: the JPEG decoder (decoder=).
func (s *Source) Decoder() string { return s.pool.DecoderName() }

// MaxPixels implements loader.SizedSource: maxpixels=, the bound every
// image's header is checked against.
func (s *Source) MaxPixels() int64 { return s.pool.MaxPixels() }

// Name implements loader.Namer: record i's file, or FILE#RECORD.
func (s *Source) Name(i int64) string {
	file, rec := s.recs.Where(i)
	if rec < 0 {
		return file
	}
	return file + "#" + strconv.FormatInt(rec, 10)
}

// Label implements loader.Labeler: record i's label, without decoding.
func (s *Source) Label(i int64) (int32, error) {
	if i < 0 || i >= s.recs.Len() {
		return 0, &loader.RecordError{File: s.opt.Path, Record: i, Err: loader.ErrIndex}
	}
	return s.recs.LabelOf(i), nil
}

// Sample decodes record i into scratch; with size=any at the image's own
// size (SampleSized, whole, at scale 1).
func (s *Source) Sample(i int64, scratch []byte) (int32, []byte, error) {
	if s.opt.AnySize {
		label, pix, _, err := s.SampleSized(i, scratch, nil)
		return label, pix, err
	}
	label, data, hold, err := s.read(i)
	if err != nil {
		return 0, nil, err
	}
	pix, err := s.pool.Decode(data, scratch)
	release(hold)
	if err != nil {
		return 0, nil, s.recordError(i, err)
	}
	return label, pix, nil
}

// SampleSized implements loader.SizedSource: the header's size, then
// want's answer for it (when want is not nil), then the decode of what
// it asked for, as imagedec.Decoder.DecodeSized reports it.
func (s *Source) SampleSized(i int64, scratch []byte, want loader.Scaler) (int32, []byte, loader.Decoded, error) {
	label, data, hold, err := s.read(i)
	if err != nil {
		return 0, nil, loader.Decoded{}, err
	}
	d := s.pool.get()
	// One header read: its size is what want answers for and what the
	// decode then takes.
	var dec loader.Decoded
	h, w, err := d.SizedHeader(data)
	if err == nil {
		var ask loader.Want
		if want != nil {
			ask = want.Want(h, w)
		}
		if s.opt.Exact {
			ask.Scale = 1 // exact=torchvision: PIL's full-size pixels
		}
		dec, err = d.decodeSizedAt(data, scratch, h, w, ask)
	}
	s.pool.pool.Put(d)
	release(hold)
	if err != nil {
		return 0, nil, loader.Decoded{}, s.recordError(i, err)
	}
	return label, Pixels(scratch, dec), dec, nil
}

// read returns record i's label and bytes, checked: the index, maxbytes=
// before reading, the label after.
func (s *Source) read(i int64) (int32, []byte, Hold, error) {
	if i < 0 || i >= s.recs.Len() {
		return 0, nil, nil, &loader.RecordError{File: s.opt.Path, Record: i, Err: loader.ErrIndex}
	}
	data, hold, err := s.encoded(i)
	if err != nil {
		return 0, nil, nil, err
	}
	label := s.recs.LabelOf(i)
	if label < 0 || int(label) >= s.classes {
		release(hold)
		return 0, nil, nil, s.recordError(i, fmt.Errorf("%w: null, negative or over %d classes", loader.ErrLabel, s.classes))
	}
	return label, data, hold, nil
}

// encoded returns record i's bytes, refusing one over maxbytes= before
// it is read; errors name the record.
func (s *Source) encoded(i int64) ([]byte, Hold, error) {
	if n := s.recs.SizeOf(i); n > s.maxBytes {
		return nil, nil, s.recordError(i, TooLarge(n, s.maxBytes))
	}
	data, hold, err := s.recs.Encoded(i)
	if errors.Is(err, loader.ErrClosed) {
		return nil, nil, &loader.RecordError{File: s.opt.Path, Record: i, Err: err}
	}
	if err != nil {
		return nil, nil, s.recordError(i, err)
	}
	return data, hold, nil
}

// recordError names record i in err.
func (s *Source) recordError(i int64, err error) error {
	file, rec := s.recs.Where(i)
	return &loader.RecordError{File: file, Record: rec, Err: err}
}

func release(h Hold) {
	if h != nil {
		h.Release()
	}
}

var (
	_ loader.SizedSource  = (*Source)(nil)
	_ loader.Namer        = (*Source)(nil)
	_ loader.Labeler      = (*Source)(nil)
	_ loader.DecoderNamer = (*Source)(nil)
)
