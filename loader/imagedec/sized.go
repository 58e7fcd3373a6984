package imagedec

import (
	"fmt"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/loader"
)

// AnySizeMaxPixels is the default maxpixels= of a dataset of varying
// sizes (size=any), where every worker's scratch holds an image of that
// many pixels: 16 Mpx, 48 MiB as RGB, above any ImageNet photo.
const AnySizeMaxPixels = 1 << 24

// MaxPixels returns the pool's pixel bound.
func (p *Pool) MaxPixels() int64 {
	if p.maxPixels <= 0 {
		return DefaultMaxPixels
	}
	return p.maxPixels
}

// SizedHeader reads the full size of the image in data from its header
// and checks it as DecodeSized does (positive, within MaxPixels), without
// decoding anything: what a caller needs to say what it wants decoded
// (loader.Want). Errors are DecodeSized's.
func (d *Decoder) SizedHeader(data []byte) (h, w int, err error) {
	if d.Backend == TurboJPEG && sniff(data) == fmtJPEG {
		if err := d.turboReady(); err != nil {
			return 0, 0, err
		}
		if err := d.turboHeader(data); err != nil {
			return 0, 0, err
		}
		w, h = int(d.tj.width), int(d.tj.height)
		return h, w, d.checkPixels(Config{Format: "jpeg", Width: w, Height: h})
	}
	_, cfg, err := d.header(data)
	if err == nil {
		err = d.checkPixels(cfg)
	}
	return cfg.Height, cfg.Width, err
}

// DecodeSized decodes an image of any size up to MaxPixels into dst as
// RGB HWC, for a dataset of varying sizes (loader.SizedSource), as want
// asks, and reports what it decoded: the full size from the header, the
// DCT scaling denominator and the region dst now holds (loader.Decoded).
// TurboJPEG decodes a JPEG at want.Scale when it is 2, 4 or 8 (libjpeg's
// scaled IDCT: far less work for a large photo); every other format and
// the Go decoder decode at 1. At scale 1, when want.Crop is a box inside
// a large JPEG and smaller than it, TurboJPEG decodes that box alone
// where it can (crop.go), and the report says so; otherwise it decodes
// the whole image. want is plain data: the decode calls nothing back.
// d.H, d.W and d.Resize are ignored. Errors are Decode's.
func (d *Decoder) DecodeSized(data, dst []byte, want loader.Want) (loader.Decoded, error) {
	h, w, err := d.SizedHeader(data)
	if err != nil {
		return loader.Decoded{}, err
	}
	return d.decodeSizedAt(data, dst, h, w, want)
}

// decodeSizedAt is DecodeSized of an image whose full size h×w the
// caller has read with SizedHeader, so the header is not read twice.
func (d *Decoder) decodeSizedAt(data, dst []byte, h, w int, want loader.Want) (loader.Decoded, error) {
	if d.Backend == TurboJPEG && sniff(data) == fmtJPEG {
		release, err := admit("JPEG", h, w)
		if err != nil {
			return loader.Decoded{}, err
		}
		defer release()
		return d.decodeTurboSized(data, dst, h, w, want)
	}
	// Decode at the image's own size: Decode then neither resizes nor
	// refuses it (and asks the memory gate).
	h0, w0, r0 := d.H, d.W, d.Resize
	d.H, d.W, d.Resize = h, w, false
	err := d.Decode(data, dst)
	d.H, d.W, d.Resize = h0, w0, r0
	if err != nil {
		return loader.Decoded{}, err
	}
	return loader.WholeImage(h, w, 1), nil
}

func (d *Decoder) decodeTurboSized(data, dst []byte, h, w int, want loader.Want) (loader.Decoded, error) {
	den := 1
	if s := want.Scale; s == 2 || s == 4 || s == 8 {
		den = s
	}
	// jpegx decodes a small image whole faster than libjpeg crops it.
	if box := want.Crop; den == 1 && w*h > exactMaxPixels && box.W > 0 && box.H > 0 &&
		box.X >= 0 && box.Y >= 0 && int(box.X+box.W) <= w && int(box.Y+box.H) <= h && int(box.W)*int(box.H) < w*h {
		n := int(box.W) * int(box.H) * 3
		if len(dst) >= n && d.decodeCrop(data, dst[:n], w, h, box) {
			return loader.Decoded{H: h, W: w, Scale: 1, Box: box}, nil
		}
	}
	sh, sw := augment.ScaledSize(h, w, den)
	if len(dst) < sh*sw*3 {
		return loader.Decoded{}, fmt.Errorf("imagedec: buffer of %d bytes for a %dx%d RGB image", len(dst), sw, sh)
	}
	// TurboJPEG picks the largest scaling factor whose output fits the
	// size asked for: exactly 1/den for TJSCALED sizes.
	if err := d.turboRGB(data, dst[:sh*sw*3], sw, sh); err != nil {
		return loader.Decoded{}, err
	}
	return loader.WholeImage(h, w, den), nil
}

// Pixels returns the bytes of dst that a DecodeSized reported as dec
// left there: the region's pixels, at its scale.
func Pixels(dst []byte, dec loader.Decoded) []byte {
	if dec.Whole() {
		sh, sw := augment.ScaledSize(dec.H, dec.W, dec.Scale)
		return dst[:sh*sw*3]
	}
	return dst[:int(dec.Box.W)*int(dec.Box.H)*3]
}

// checkPixels is check without the dataset's size: the header's size must
// be positive and within MaxPixels.
func (d *Decoder) checkPixels(cfg Config) error {
	h0, w0, r0 := d.H, d.W, d.Resize
	d.Resize = true
	err := d.check(cfg)
	d.H, d.W, d.Resize = h0, w0, r0
	return err
}
