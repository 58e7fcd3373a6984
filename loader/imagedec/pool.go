package imagedec

import (
	"fmt"
	"sync"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/loader"
)

// Pool hands Decoders to the workers of an encoded-image source.
// Source.Sample gives a worker only a scratch buffer for the pixels, so
// the decoder state (libjpeg-turbo's decompressor, jpegx's tables and
// planes, the resize buffers) lives in a sync.Pool: its per-P caches give
// each worker its own decoder back nearly always, and with the TurboJPEG
// backend the steady state allocates nothing for JPEG (GoJPEG: what
// image/jpeg allocates per image, nothing more). A Pool is safe for
// concurrent use.
type Pool struct {
	h, w      int
	maxPixels int64
	resize    bool
	backend   Backend
	pool      sync.Pool
}

// NewPool returns a pool of decoders of h×w images, refusing images that
// declare more than maxPixels and, unless resize, images of another size.
func NewPool(h, w int, maxPixels int64, resize bool) *Pool {
	return &Pool{h: h, w: w, maxPixels: maxPixels, resize: resize}
}

// WithBackend sets the JPEG decoder of the pool's decoders (GoJPEG
// unless set; see ChooseBackend) and returns p. Call it before the first
// Decode.
func (p *Pool) WithBackend(b Backend) *Pool {
	p.backend = b
	return p
}

// Backend returns the pool's JPEG decoder.
func (p *Pool) Backend() Backend { return p.backend }

// DecoderName describes the pool's JPEG decoder for people: "turbo
// (LIBRARY FILE; …)" or "go (image/jpeg)".
func (p *Pool) DecoderName() string {
	if p.backend == TurboJPEG {
		crop := "; crops decoded alone by " + cropPath()
		if err := CropAvailable(); err != nil {
			crop = "; whole images only: " + err.Error()
		}
		return "turbo (" + TurboPath() + "; jpegx up to 256×256" + crop + ")"
	}
	return "go (image/jpeg)"
}

// Spec returns what Decode writes: H×W×3 U8 HWC.
func (p *Pool) Spec() augment.Spec {
	return augment.Spec{H: p.h, W: p.w, C: 3, DType: sample.U8, Layout: sample.HWC}
}

// Decode decodes data into scratch, which must hold Spec().Bytes(), and
// returns the pixels. Errors are Decoder.Decode's.
func (p *Pool) Decode(data, scratch []byte) ([]byte, error) {
	need := p.h * p.w * 3
	if len(scratch) < need {
		return nil, fmt.Errorf("scratch of %d bytes, need %d", len(scratch), need)
	}
	d := p.get()
	err := d.Decode(data, scratch[:need])
	p.pool.Put(d)
	if err != nil {
		return nil, err
	}
	return scratch[:need], nil
}

// get lends a decoder of the pool's settings; give it back with
// p.pool.Put.
func (p *Pool) get() *Decoder {
	if d, ok := p.pool.Get().(*Decoder); ok {
		return d
	}
	return &Decoder{H: p.h, W: p.w, MaxPixels: p.maxPixels, Resize: p.resize, Backend: p.backend}
}

// Size reads the size of the image in data from its header, refusing one
// over maxPixels: a dataset that declares no size takes its first image's.
func Size(data []byte, maxPixels int64) (h, w int, err error) {
	var d Decoder
	cfg, err := d.DecodeConfig(data)
	if err != nil {
		return 0, 0, err
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return 0, 0, fmt.Errorf("%w: %s header declares %dx%d", loader.ErrCorrupt, cfg.Format, cfg.Width, cfg.Height)
	}
	if int64(cfg.Width)*int64(cfg.Height) > maxPixels {
		return 0, 0, fmt.Errorf("%w: %s header declares %dx%d, over %d pixels", ErrTooLarge, cfg.Format, cfg.Width, cfg.Height, maxPixels)
	}
	return cfg.Height, cfg.Width, nil
}
