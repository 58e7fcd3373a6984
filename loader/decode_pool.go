package loader

import (
	"fmt"
	"sync"

	"github.com/loaderd/loaderd/augment"
)

// decoderPool hands ImageDecoders to the workers of an encoded-image
// source. Source.Sample gives a worker only a scratch buffer for the
// pixels, so the decoder state (a JPEG decoder's tables and planes, about
// 12 KiB for a CIFAR image) lives in a sync.Pool: its per-P caches give
// each worker its own decoder back nearly always, and the steady state
// allocates nothing for JPEG.
type decoderPool struct {
	h, w      int
	maxPixels int64
	resize    bool
	pool      sync.Pool
	bufs      sync.Pool // *[]byte file buffers, for sources that read files
}

func newDecoderPool(h, w int, maxPixels int64, resize bool) *decoderPool {
	return &decoderPool{h: h, w: w, maxPixels: maxPixels, resize: resize}
}

func (p *decoderPool) spec() augment.Spec {
	return augment.Spec{H: p.h, W: p.w, C: 3, DType: augment.U8, Layout: augment.HWC}
}

// decode decodes data into scratch and returns the pixels.
func (p *decoderPool) decode(data, scratch []byte) ([]byte, error) {
	need := p.h * p.w * 3
	if len(scratch) < need {
		return nil, fmt.Errorf("scratch of %d bytes, need %d", len(scratch), need)
	}
	d, _ := p.pool.Get().(*ImageDecoder)
	if d == nil {
		d = &ImageDecoder{H: p.h, W: p.w, MaxPixels: p.maxPixels, Resize: p.resize}
	}
	err := d.Decode(data, scratch[:need])
	p.pool.Put(d)
	if err != nil {
		return nil, err
	}
	return scratch[:need], nil
}

// getBuf and putBuf lend a file buffer.
func (p *decoderPool) getBuf() *[]byte {
	if b, ok := p.bufs.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, 0, 64<<10)
	return &b
}

func (p *decoderPool) putBuf(b *[]byte) { p.bufs.Put(b) }

// imageSize reads the size of the image in data, refusing one over
// maxPixels: the dataset's size when none is declared.
func imageSize(data []byte, maxPixels int64) (h, w int, err error) {
	var d ImageDecoder
	cfg, err := d.DecodeConfig(data)
	if err != nil {
		return 0, 0, err
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return 0, 0, fmt.Errorf("%w: %s header declares %dx%d", ErrCorrupt, cfg.Format, cfg.Width, cfg.Height)
	}
	if int64(cfg.Width)*int64(cfg.Height) > maxPixels {
		return 0, 0, fmt.Errorf("%w: %s header declares %dx%d, over %d pixels", ErrImageTooLarge, cfg.Format, cfg.Width, cfg.Height, maxPixels)
	}
	return cfg.Height, cfg.Width, nil
}
