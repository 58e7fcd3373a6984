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

// DecodeSized decodes an image of any size up to MaxPixels into dst as
// RGB HWC, for a dataset of varying sizes (loader.SizedSource): it returns
// the full size h×w from the header and the DCT scaling denominator den
// it decoded at, dst then holding augment.ScaledSize(h, w, den) pixels.
// scale, when not nil, is asked for den with the full size before
// decoding; TurboJPEG decodes a JPEG at it (libjpeg's scaled IDCT, 1/2,
// 1/4 or 1/8: far less work for a large photo), every other format and
// the Go decoder at 1. When scale is a loader.Cropper whose box is
// smaller than a large JPEG, TurboJPEG decodes only the box (crop.go):
// dst then holds its pixels alone, and Cropped reports it. d.H, d.W and
// d.Resize are ignored. Errors are Decode's.
func (d *Decoder) DecodeSized(data, dst []byte, scale loader.Scaler) (h, w, den int, err error) {
	d.cropped = 0
	if d.Backend == TurboJPEG && sniff(data) == fmtJPEG {
		return d.decodeTurboSized(data, dst, scale)
	}
	_, cfg, err := d.header(data)
	if err != nil {
		return 0, 0, 0, err
	}
	if err := d.checkPixels(cfg); err != nil {
		return 0, 0, 0, err
	}
	if scale != nil {
		scale.Scale(cfg.Height, cfg.Width) // draws the params; decoded at 1
	}
	// Decode at the image's own size: Decode then neither resizes nor
	// refuses it.
	h0, w0, r0 := d.H, d.W, d.Resize
	d.H, d.W, d.Resize = cfg.Height, cfg.Width, false
	err = d.Decode(data, dst)
	d.H, d.W, d.Resize = h0, w0, r0
	if err != nil {
		return 0, 0, 0, err
	}
	return cfg.Height, cfg.Width, 1, nil
}

func (d *Decoder) decodeTurboSized(data, dst []byte, scale loader.Scaler) (h, w, den int, err error) {
	if err := d.turboReady(); err != nil {
		return 0, 0, 0, err
	}
	if err := d.turboHeader(data); err != nil {
		return 0, 0, 0, err
	}
	w, h = int(d.tj.width), int(d.tj.height)
	if err := d.checkPixels(Config{Format: "jpeg", Width: w, Height: h}); err != nil {
		return 0, 0, 0, err
	}
	den = 1
	if scale != nil {
		if s := scale.Scale(h, w); s == 2 || s == 4 || s == 8 {
			den = s
		}
	}
	if den == 1 && w*h > exactMaxPixels {
		// jpegx decodes a small image whole faster than libjpeg crops it.
		if c, ok := scale.(loader.Cropper); ok {
			if box, ok := c.Crop(); ok && int(box.W)*int(box.H) < w*h {
				n := int(box.W) * int(box.H) * 3
				if len(dst) >= n && d.decodeCrop(data, dst[:n], w, h, box) {
					d.cropped = n
					return h, w, 1, nil
				}
			}
		}
	}
	sh, sw := augment.ScaledSize(h, w, den)
	if len(dst) < sh*sw*3 {
		return 0, 0, 0, fmt.Errorf("imagedec: buffer of %d bytes for a %dx%d RGB image", len(dst), sw, sh)
	}
	// TurboJPEG picks the largest scaling factor whose output fits the
	// size asked for: exactly 1/den for TJSCALED sizes.
	if err := d.turboRGB(data, dst[:sh*sw*3], sw, sh); err != nil {
		return 0, 0, 0, err
	}
	return h, w, den, nil
}

// Cropped returns the bytes of the crop the last DecodeSized left in dst
// (box.W·box.H·3), 0 when it decoded the whole image.
func (d *Decoder) Cropped() int { return d.cropped }

// checkPixels is check without the dataset's size: the header's size must
// be positive and within MaxPixels.
func (d *Decoder) checkPixels(cfg Config) error {
	h0, w0, r0 := d.H, d.W, d.Resize
	d.Resize = true
	err := d.check(cfg)
	d.H, d.W, d.Resize = h0, w0, r0
	return err
}

// DecodeSized is Decoder.DecodeSized with a pooled decoder; scratch must
// hold maxPixels·3 bytes.
func (p *Pool) DecodeSized(data, scratch []byte, scale loader.Scaler) (pix []byte, h, w, den int, err error) {
	d, _ := p.pool.Get().(*Decoder)
	if d == nil {
		d = &Decoder{H: p.h, W: p.w, MaxPixels: p.maxPixels, Resize: p.resize, Backend: p.backend}
	}
	h, w, den, err = d.DecodeSized(data, scratch, scale)
	cropped := d.cropped
	p.pool.Put(d)
	if err != nil {
		return nil, 0, 0, 0, err
	}
	if cropped > 0 {
		return scratch[:cropped], h, w, den, nil
	}
	sh, sw := augment.ScaledSize(h, w, den)
	return scratch[:sh*sw*3], h, w, den, nil
}
