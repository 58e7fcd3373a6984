package imagedec

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"path"
	"strings"

	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"
	"golang.org/x/image/webp"

	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/imagedec/jpegx"
)

// Sentinel errors of image decoding; the formats wrap them in a
// *loader.RecordError naming the file. A corrupt image wraps
// loader.ErrCorrupt, a cut-off one loader.ErrTruncated.
var (
	ErrFormat   = errors.New("not a supported image")
	ErrSize     = errors.New("image size differs from the dataset's")
	ErrTooLarge = errors.New("image too large")
	// ErrExtension is for the formats that admit files by name (folder,
	// tar): a file whose extension is not IsImageName's.
	ErrExtension = errors.New("unknown image extension")
)

// DefaultMaxPixels bounds the pixels an image may declare in its header
// before anything is allocated for it: 64 Mpx, 192 MiB as RGB.
const DefaultMaxPixels = 1 << 26

// DefaultMaxBytes bounds the size of one encoded image (a file of a
// folder, a member of a tar, a cell of a Parquet column), checked before
// it is read or decoded: 64 MiB, far above any real training image, far
// below what one worker should read for one sample.
const DefaultMaxBytes = 64 << 20

// imageExts are the file extensions the folder and tar formats read.
var imageExts = map[string]bool{
	".jpg": true, ".jpeg": true, ".jpe": true, ".png": true, ".gif": true,
	".bmp": true, ".tif": true, ".tiff": true, ".webp": true,
}

// IsImageName reports whether name has an image extension, one of the
// formats Decoder reads (case-insensitive).
func IsImageName(name string) bool { return imageExts[strings.ToLower(path.Ext(name))] }

// Image formats, told apart by content (the extension only admits a file).
const (
	fmtUnknown = iota
	fmtJPEG
	fmtPNG
	fmtGIF
	fmtBMP
	fmtTIFF
	fmtWebP
)

var formatNames = [...]string{"unknown", "jpeg", "png", "gif", "bmp", "tiff", "webp"}

// sniff returns the format of data from its magic bytes. (A switch on
// the first byte: this runs for every sample.)
func sniff(data []byte) int {
	if len(data) < 4 {
		return fmtUnknown
	}
	switch data[0] {
	case 0xff:
		if data[1] == 0xd8 && data[2] == 0xff {
			return fmtJPEG
		}
	case 0x89:
		if string(data[1:4]) == "PNG" && len(data) >= 8 && string(data[4:8]) == "\r\n\x1a\n" {
			return fmtPNG
		}
	case 'G':
		if len(data) >= 6 && (string(data[:6]) == "GIF87a" || string(data[:6]) == "GIF89a") {
			return fmtGIF
		}
	case 'B':
		// The magic golang.org/x/image/bmp registers: BM????\0\0\0\0.
		if len(data) >= 10 && data[1] == 'M' && string(data[6:10]) == "\x00\x00\x00\x00" {
			return fmtBMP
		}
	case 'I', 'M':
		if s := string(data[:4]); s == "II*\x00" || s == "MM\x00*" {
			return fmtTIFF
		}
	case 'R':
		// The same magic golang.org/x/image/webp registers: RIFF????WEBPVP8.
		if len(data) >= 15 && string(data[:4]) == "RIFF" && string(data[8:15]) == "WEBPVP8" {
			return fmtWebP
		}
	}
	return fmtUnknown
}

// Config is what an image's header says.
type Config struct {
	Format        string // jpeg, png, gif, bmp, tiff or webp
	Width, Height int
}

// Decoder decodes JPEG, PNG, GIF, BMP, TIFF and WebP images into
// H×W×3 RGB bytes in HWC order. Grey and paletted images become RGB and
// alpha is dropped (straight colour, as PIL's convert("RGB")). It reads the
// header first and refuses an image of more than MaxPixels, or of another
// size unless Resize is set, before decoding it, so a decompression bomb
// costs nothing. With Resize an image of another size is stretched to
// H×W with PIL's bilinear filter (see resizer).
//
// A Decoder keeps its JPEG decoders and buffers between calls, so with
// the TurboJPEG backend the steady state allocates nothing for JPEG;
// GoJPEG allocates what image/jpeg does for each image (its decoder state
// and the image), nothing more. It is not safe for concurrent use:
// sources share them through a Pool, one per worker in practice. The zero
// value refuses every image but reads headers (DecodeConfig).
type Decoder struct {
	H, W      int     // the size every image must have, or is resized to
	MaxPixels int64   // 0 means DefaultMaxPixels
	Resize    bool    // stretch images of another size to H×W
	Backend   Backend // the JPEG decoder; the zero value is GoJPEG
	// LibjpegOnly sends every JPEG of the TurboJPEG backend to
	// libjpeg-turbo, none to jpegx (same pixels; for comparing).
	LibjpegOnly bool

	jx   jpegx.Decoder // libjpeg-turbo's pixels for small JPEGs, without its setup cost
	tj   *turboHandle  // Backend TurboJPEG's decompressor, made on first use
	crop *cropHandle   // libjpeg's, for decoding only a crop (crop.go)
	// cropOff: libjpeg.so.62 is missing here, decode whole images.
	cropOff bool
	cmyk    []byte // a CMYK JPEG before conversion (TurboJPEG)
	br      bytes.Reader
	native  []byte // an image at its own size, before resizing
	rs      resizer
}

// DecodeConfig reads the format and size of the image in data from its
// header. Errors wrap ErrFormat, loader.ErrCorrupt or loader.ErrTruncated.
func (d *Decoder) DecodeConfig(data []byte) (Config, error) {
	_, cfg, err := d.config(data)
	return cfg, err
}

func (d *Decoder) config(data []byte) (f int, cfg Config, err error) {
	f = sniff(data)
	if f == fmtUnknown {
		return f, cfg, fmt.Errorf("%w: unrecognised content (%s)", ErrFormat, magicString(data))
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %s header: decoder panic: %v", loader.ErrCorrupt, formatNames[f], r)
		}
	}()
	var c image.Config
	d.br.Reset(data)
	switch f {
	case fmtJPEG:
		c, err = jpeg.DecodeConfig(&d.br)
	case fmtPNG:
		c, err = png.DecodeConfig(&d.br)
	case fmtGIF:
		c, err = gif.DecodeConfig(&d.br)
	case fmtBMP:
		c, err = bmp.DecodeConfig(&d.br)
	case fmtTIFF:
		c, err = tiff.DecodeConfig(&d.br)
	case fmtWebP:
		c, err = webp.DecodeConfig(&d.br)
	}
	if err != nil {
		return f, cfg, decodeError(formatNames[f]+" header", err)
	}
	return f, Config{Format: formatNames[f], Width: c.Width, Height: c.Height}, nil
}

// header is config for a decode. A JPEG whose marker segments scanSOF
// walks with certainty takes its size from the frame header found there:
// image/jpeg's DecodeConfig would allocate a whole decoder (13 KiB) to
// read the same bytes, some 20% of a CIFAR image's decode. image/jpeg's
// Decode then walks those segments as scanSOF did (they are whole and
// contiguous; whatever it refuses before the frame header allocates
// nothing) and allocates the image from that same frame header, at most
// once (it refuses a second), so the size checked here is the size it
// decodes. Everything else, and any JPEG scanSOF is unsure of, is read by
// the standard decoders' DecodeConfig, as DecodeConfig does.
func (d *Decoder) header(data []byte) (f int, cfg Config, err error) {
	if w, h, _, ok := scanSOF(data); ok {
		return fmtJPEG, Config{Format: formatNames[fmtJPEG], Width: w, Height: h}, nil
	}
	return d.config(data)
}

// Decode writes the image in data into dst (at least H·W·3 bytes) as RGB
// HWC. Errors wrap ErrFormat, ErrSize, ErrTooLarge, loader.ErrCorrupt or
// loader.ErrTruncated.
func (d *Decoder) Decode(data []byte, dst []byte) (err error) {
	release, err := d.admitHeader(data)
	if err != nil {
		return err
	}
	defer release()
	if d.Backend == TurboJPEG && sniff(data) == fmtJPEG {
		return d.decodeTurbo(data, dst)
	}
	f, cfg, err := d.header(data)
	if err != nil {
		return err
	}
	if err := d.check(cfg); err != nil {
		return err
	}
	if len(dst) < d.H*d.W*3 {
		return fmt.Errorf("imagedec: buffer of %d bytes for a %dx%d RGB image", len(dst), d.W, d.H)
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %s: decoder panic: %v", loader.ErrCorrupt, cfg.Format, r)
		}
	}()
	var img image.Image
	d.br.Reset(data)
	switch f {
	case fmtJPEG:
		img, err = jpeg.Decode(&d.br)
	case fmtPNG:
		img, err = png.Decode(&d.br)
	case fmtGIF:
		img, err = gif.Decode(&d.br)
	case fmtBMP:
		img, err = bmp.Decode(&d.br)
	case fmtTIFF:
		img, err = tiff.Decode(&d.br)
	case fmtWebP:
		img, err = webp.Decode(&d.br)
	}
	if err != nil {
		return decodeError(cfg.Format, err)
	}
	b := img.Bounds() // a GIF frame may be smaller than its screen
	if b.Dx() == d.W && b.Dy() == d.H {
		return toRGB(dst[:d.H*d.W*3], img)
	}
	if !d.Resize || b.Empty() {
		return fmt.Errorf("%w: %s frame is %dx%d, want %dx%d (%s)", ErrSize, cfg.Format, b.Dx(), b.Dy(), d.W, d.H, sizeFix)
	}
	native := d.nativeBuf(b.Dx() * b.Dy() * 3)
	if err := toRGB(native, img); err != nil {
		return err
	}
	d.rs.resize(dst[:d.H*d.W*3], native, b.Dy(), b.Dx(), d.H, d.W)
	return nil
}

// sizeFix is what an image of another size than the dataset's asks of
// the user. The dataset's size came from size= or from its first images
// (Source's probe found them alike), so the images vary: size=any serves
// each at its own size to a chain that opens with a resize or crop, as
// torchvision's ImageFolder would; resize=bilinear stretches instead.
const sizeFix = "the images vary in size: open the dataset with ?size=any, each image at its own size, " +
	"and start augment with resize=N, center_crop=N or random_resized_crop=N; " +
	"or with ?size=WxH&resize=bilinear to stretch every image to one size"

// check refuses an image whose header declares the wrong size.
func (d *Decoder) check(cfg Config) error {
	limit := d.MaxPixels
	if limit <= 0 {
		limit = DefaultMaxPixels
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return fmt.Errorf("%w: %s header declares %dx%d", loader.ErrCorrupt, cfg.Format, cfg.Width, cfg.Height)
	}
	if int64(cfg.Width)*int64(cfg.Height) > limit {
		return fmt.Errorf("%w: %s header declares %dx%d, over %d pixels", ErrTooLarge, cfg.Format, cfg.Width, cfg.Height, limit)
	}
	if !d.Resize && (cfg.Width != d.W || cfg.Height != d.H) {
		return fmt.Errorf("%w: %s is %dx%d, want %dx%d (%s)", ErrSize, cfg.Format, cfg.Width, cfg.Height, d.W, d.H, sizeFix)
	}
	return nil
}

// decodeError classifies a decoder's error: a cut-off image is truncated,
// anything else corrupt. Some decoders flatten io.ErrUnexpectedEOF into
// their own message ("png: invalid format: unexpected EOF", image/jpeg's
// "short Huffman data", libjpeg's "Premature end of JPEG file"), hence
// the text match.
func decodeError(what string, err error) error {
	msg := err.Error()
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		strings.Contains(msg, "unexpected EOF") || strings.Contains(msg, "short Huffman data") ||
		strings.Contains(msg, "Premature end") {
		return fmt.Errorf("%w: %s: %w", loader.ErrTruncated, what, err)
	}
	return fmt.Errorf("%w: %s: %w", loader.ErrCorrupt, what, err)
}

func magicString(data []byte) string {
	if len(data) == 0 {
		return "empty"
	}
	return fmt.Sprintf("starts % x", data[:min(len(data), 8)])
}
