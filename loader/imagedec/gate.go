package imagedec

import (
	"fmt"
	"sync/atomic"
)

// MemoryGate is asked for the memory a decode of a large image takes
// before the decode starts, and given it back when the decode ends: a
// daemon counts decodes in its memory budget this way, where otherwise a
// few workers decoding 64-Mpx PNGs would hold gigabytes no limit sees.
// Acquire may wait for memory other decodes give back; an error fails the
// decode. Implementations must be safe for concurrent use.
type MemoryGate interface {
	Acquire(n int64) error
	Release(n int64)
}

// gateMinPixels: images under this many pixels decode without asking;
// their buffers are the workers' scratch, which is counted up front.
const gateMinPixels = 1 << 20

// gateBytesPerPixel is what a decode may hold per pixel of the image:
// the decoder's own image (RGBA, or YCbCr planes) and the RGB copy.
const gateBytesPerPixel = 4

type gateBox struct{ g MemoryGate }

var gate atomic.Pointer[gateBox]

// SetMemoryGate makes every decode of an image of 1 Mpx or more ask g
// first (nil: none). It is process-wide: a daemon sets it once.
func SetMemoryGate(g MemoryGate) {
	if g == nil {
		gate.Store(nil)
		return
	}
	gate.Store(&gateBox{g})
}

func noRelease() {}

// admit asks the gate, if any, for the memory of decoding an h×w image,
// and returns what gives it back.
func admit(format string, h, w int) (func(), error) {
	b := gate.Load()
	px := int64(h) * int64(w)
	if b == nil || px < gateMinPixels {
		return noRelease, nil
	}
	n := px * gateBytesPerPixel
	if err := b.g.Acquire(n); err != nil {
		return nil, fmt.Errorf("%w: %s of %dx%d needs %d MiB to decode: %w", ErrTooLarge, format, w, h, n>>20, err)
	}
	return func() { b.g.Release(n) }, nil
}

// admitHeader is admit for an image whose header has not been read: a
// header it cannot read is left to the decode to report.
func (d *Decoder) admitHeader(data []byte) (func(), error) {
	if gate.Load() == nil {
		return noRelease, nil
	}
	_, cfg, err := d.header(data)
	if err != nil {
		return noRelease, nil
	}
	return admit(cfg.Format, cfg.Height, cfg.Width)
}
