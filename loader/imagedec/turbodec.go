package imagedec

import (
	"bytes"
	"fmt"
	"image/color"
	"image/jpeg"
	"os"
	"strings"

	"github.com/loaderd/loaderd/loader"
)

// decodeTurbo is Decode for a JPEG with the TurboJPEG backend. The header
// is TurboJPEG's own parse; the size is checked against MaxPixels and the
// dataset's before anything is decoded, and every buffer handed to C is
// sized from that header exactly.
func (d *Decoder) decodeTurbo(data, dst []byte) error {
	if err := d.turboReady(); err != nil {
		return err
	}
	t := d.tj
	if err := d.turboHeader(data); err != nil {
		return err
	}
	w, h := int(t.width), int(t.height)
	if err := d.check(Config{Format: "jpeg", Width: w, Height: h}); err != nil {
		return err
	}
	if len(dst) < d.H*d.W*3 {
		return fmt.Errorf("imagedec: buffer of %d bytes for a %dx%d RGB image", len(dst), d.W, d.H)
	}
	out := dst[:d.H*d.W*3]
	resize := w != d.W || h != d.H
	if resize {
		out = d.nativeBuf(w * h * 3)
	}
	if err := d.turboRGB(data, out, w, h); err != nil {
		return err
	}
	if resize {
		d.rs.resize(dst[:d.H*d.W*3], out, h, w, d.H, d.W)
	}
	return nil
}

// turboHeader reads the header into d.tj. A well-formed header's frame
// (scanSOF) gives the size and colour model without a second call into
// the library: tjDecompressHeader3 parses every table that tjDecompress2
// then parses again, ~2 µs of a 32×32 image's ~15. Anything scanSOF is
// unsure of goes to TurboJPEG's own parse. TurboJPEG 2.1's header call
// refuses the chroma subsamplings it has no name for (4:1:0 and other
// rare ones) although libjpeg decodes them: then the size and colour space
// come from the Go decoder's header parse, and tjDecompress2 decodes.
func (d *Decoder) turboHeader(data []byte) error {
	t := d.tj
	if w, h, nc, ok := scanSOF(data); ok {
		t.width, t.height, t.colors = int32(w), int32(h), tjCSYCbCr
		if nc == 4 { // CMYK or YCCK: both decode through TJPF_CMYK
			t.colors = tjCSCMYK
		}
		return nil
	}
	err := t.header(data)
	if err == nil {
		return nil
	}
	if !strings.Contains(err.Error(), "subsampling type") {
		return turboError("jpeg header", data, err)
	}
	d.br.Reset(data)
	c, gerr := jpeg.DecodeConfig(&d.br)
	if gerr != nil {
		return turboError("jpeg header", data, err)
	}
	t.width, t.height, t.colors = int32(c.Width), int32(c.Height), tjCSYCbCr
	if c.ColorModel == color.CMYKModel {
		t.colors = tjCSCMYK
	}
	return nil
}

// turboError classifies a TurboJPEG failure: loader.ErrTruncated when
// libjpeg ran out of data or the file lacks its final EOI marker (cut
// off; libjpeg then reads its own fake EOI and fails on whatever it was
// parsing), loader.ErrCorrupt otherwise.
func turboError(what string, data []byte, err error) error {
	if !bytes.HasSuffix(data, []byte{0xff, 0xd9}) {
		return fmt.Errorf("%w: %s: %w", loader.ErrTruncated, what, err)
	}
	return decodeError(what, err)
}

// turboReady makes the decoder's tjhandle on first use.
func (d *Decoder) turboReady() error {
	if d.tj != nil {
		return nil
	}
	lib, err := loadTurbo()
	if err != nil {
		return err
	}
	d.tj, err = newTurboHandle(lib)
	return err
}

// nativeBuf returns the decoder's buffer for an image at its own size.
func (d *Decoder) nativeBuf(n int) []byte {
	if cap(d.native) < n {
		d.native = make([]byte, n)
	}
	return d.native[:n]
}

// exactMaxPixels is the largest sequential image jpegx decodes
// in place of libjpeg-turbo: up to 256×256 its lack of per-image setup
// wins (1.9× at 32×32, even at 256×256); beyond, libjpeg's faster entropy
// decoding and its streaming through MCU rows do (jpegx is 1.4× slower at
// 512×512). BenchmarkDecodeBySize measures the crossover. Progressive
// files go to jpegx at any size: libjpeg's progressive decoding is its
// slow path, and jpegx's is ~20% faster on ImageNet-sized photographs
// (BenchmarkDecodeProgressive).
const exactMaxPixels = 1 << 16

// progMaxPixels bounds the progressive images jpegx takes: its planes and
// whole-image coefficients (5 bytes a pixel at 4:2:0, 9 at 4:4:4) stay
// with the pooled decoder, so one huge image would pin them.
const progMaxPixels = 1 << 22

// jxOn reports whether jpegx may decode (LibjpegOnly and
// LOADERD_JPEGX=off turn it off).
func (d *Decoder) jxOn() bool { return !d.LibjpegOnly && !exactOff }

// isProgressive reports whether a JPEG's frame header, found by walking
// its marker segments, is SOF2 (progressive Huffman).
func isProgressive(b []byte) bool {
	for i := 2; i+4 <= len(b) && b[i] == 0xff; i += 2 + (int(b[i+2])<<8 | int(b[i+3])) {
		if b[i+1] == 0xc2 {
			return true
		}
		if b[i+1] == 0xda {
			return false
		}
	}
	return false
}

// exactOff turns jpegx off (LOADERD_JPEGX=off): every JPEG goes
// to libjpeg-turbo, for comparing the two.
var exactOff = os.Getenv("LOADERD_JPEGX") == "off"

// turboRGB decodes the image whose header t holds into out, exactly
// w·h·3 bytes, at the scaled size w×h. Greyscale is expanded to RGB by
// libjpeg (each value three times, as PIL's convert("RGB")); CMYK and
// YCCK are decoded to CMYK and converted as PIL does (see cmykToRGB).
func (d *Decoder) turboRGB(data, out []byte, w, h int) error {
	t := d.tj
	if len(out) != w*h*3 {
		return fmt.Errorf("imagedec: turbo output of %d bytes for %dx%d", len(out), w, h)
	}
	if t.colors == tjCSCMYK || t.colors == tjCSYCCK {
		n := w * h * 4
		if cap(d.cmyk) < n {
			d.cmyk = make([]byte, n)
		}
		if !ownTables(data) {
			if err := t.renew(); err != nil {
				return err
			}
		}
		if err := t.decompress(data, d.cmyk[:n], w, h, w*4, tjPFCMYK); err != nil {
			return turboError("jpeg", data, err)
		}
		cmykToRGB(out, d.cmyk[:n])
		return nil
	}
	if d.jxOn() && w == int(t.width) && h == int(t.height) &&
		(w*h <= exactMaxPixels || w*h <= progMaxPixels && isProgressive(data)) {
		// Same pixels as libjpeg-turbo's; anything jpegx is unsure of
		// goes on to libjpeg-turbo itself.
		if d.jx.DecodeRGB(data, out) == nil {
			return nil
		}
	}
	if !ownTables(data) {
		if err := t.renew(); err != nil {
			return err
		}
	}
	if err := t.decompress(data, out, w, h, w*3, tjPFRGB); err != nil {
		return turboError("jpeg", data, err)
	}
	return nil
}

// cmykToRGB is what PIL does with a CMYK JPEG: it reads libjpeg's values
// as inverted CMYK (rawmode "CMYK;I", Adobe's convention, which PIL
// assumes for every CMYK JPEG), and convert("RGB") computes
// R = nk - nk·C/255 with nk = 255 - K (Pillow's cmyk2rgb and MULDIV255).
func cmykToRGB(dst, src []byte) {
	for i, j := 0, 0; j+3 < len(src) && i+2 < len(dst); i, j = i+3, j+4 {
		nk := int(src[j+3]) // 255 - K where K = 255 - raw
		for c := range 3 {
			v := (255 - int(src[j+c])) * nk
			v += 128
			dst[i+c] = uint8(nk - ((v>>8)+v)>>8)
		}
	}
}

// scanSOF finds the frame header (SOFn) the way libjpeg's marker reader
// does, and returns the image's size and component count. It accepts only
// what libjpeg reads the same way: SOI, then whole marker segments
// (tables, restart interval, APPn, COM) up to the first SOF0/1/2/9/10 of
// 8-bit precision and consistent length. Anything else (bytes between
// markers, fill bytes, SOS or EOI first, other SOF types, a cut or
// inconsistent segment) returns ok = false: libjpeg's own parse decides.
// Whatever it returns, tjDecompress2 writes no more than the buffer sized
// from it (it scales down or fails rather than overrun w×h).
func scanSOF(b []byte) (w, h, ncomp int, ok bool) {
	if len(b) < 2 || b[0] != 0xff || b[1] != 0xd8 {
		return 0, 0, 0, false
	}
	for i := 2; i+4 <= len(b); {
		if b[i] != 0xff {
			return 0, 0, 0, false
		}
		m, n := b[i+1], int(b[i+2])<<8|int(b[i+3])
		switch {
		case m == 0xc0 || m == 0xc1 || m == 0xc2 || m == 0xc9 || m == 0xca:
			if i+2+n > len(b) || n < 8 {
				return 0, 0, 0, false
			}
			s := b[i+4 : i+2+n]
			h, w, ncomp = int(s[1])<<8|int(s[2]), int(s[3])<<8|int(s[4]), int(s[5])
			if s[0] != 8 || n != 8+3*ncomp || ncomp != 1 && ncomp != 3 && ncomp != 4 || h == 0 || w == 0 {
				return 0, 0, 0, false
			}
			return w, h, ncomp, true
		case m >= 0xd0 && m <= 0xd7 || m == 0x01: // RSTn, TEM: no segment
			i += 2
		case m == 0xc4 || m == 0xdb || m == 0xdd || m >= 0xe0 && m <= 0xef || m == 0xfe:
			if n < 2 {
				return 0, 0, 0, false
			}
			i += 2 + n
		default:
			return 0, 0, 0, false
		}
	}
	return 0, 0, 0, false
}

// ownTables reports whether data defines, before its first scan, every
// quantisation and Huffman table its frame and first scan use. libjpeg
// keeps tables between the images of one decompressor (abbreviated
// streams, Motion-JPEG frames without DHT): a file that does not define
// its own would decode with whatever the pooled decompressor read last,
// so its pixels would depend on scheduling. Such files, and all but
// single-scan sequential ones (whose later scans may lack tables), get a fresh
// decompressor (libjpeg's standard Huffman tables, or its error for a
// missing quantisation table), as PIL's one decompressor per image does.
// Unparseable headers return false.
func ownTables(b []byte) bool {
	if len(b) < 4 || b[0] != 0xff || b[1] != 0xd8 {
		return false
	}
	var q, dc, ac uint8 // bit i: table i defined
	var useQ uint8
	nf := -1 // components of the frame
	for i := 2; i+4 <= len(b); {
		if b[i] != 0xff {
			return false
		}
		m, n := b[i+1], int(b[i+2])<<8|int(b[i+3])
		if n < 2 || i+2+n > len(b) {
			return false
		}
		s := b[i+4 : i+2+n]
		switch {
		case m == 0xdb:
			for len(s) > 0 {
				l := 65 + 64*int(s[0]>>4)
				if s[0]&15 > 3 || len(s) < l {
					return false
				}
				q |= 1 << (s[0] & 15)
				s = s[l:]
			}
		case m == 0xc4:
			for len(s) >= 17 {
				l := 17
				for _, c := range s[1:17] {
					l += int(c)
				}
				if s[0]&15 > 3 || s[0]>>4 > 1 || len(s) < l {
					return false
				}
				if s[0]>>4 == 0 {
					dc |= 1 << (s[0] & 15)
				} else {
					ac |= 1 << (s[0] & 15)
				}
				s = s[l:]
			}
		case m == 0xc0 || m == 0xc1: // sequential Huffman
			if len(s) < 6 || len(s) < 6+3*int(s[5]) {
				return false
			}
			nf = int(s[5])
			for c := range nf {
				useQ |= 1 << (s[8+3*c] & 3)
			}
		case m >= 0xc2 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc:
			// Progressive, arithmetic, lossless: later scans may bring or
			// lack tables of their own; always a fresh decompressor.
			return false
		case m == 0xda:
			// One scan of every component, or later scans could lack
			// their tables.
			if len(s) < 1 || int(s[0]) != nf || len(s) < 1+2*nf {
				return false
			}
			for c := range int(s[0]) {
				t := s[2+2*c]
				if dc&(1<<(t>>4&3)) == 0 || ac&(1<<(t&3)) == 0 {
					return false
				}
			}
			return useQ&^q == 0
		}
		i += 2 + n
	}
	return false
}
