package jpegx

import (
	"encoding/binary"
	"errors"
)

// ErrUnsupported says the file is outside what this decoder reproduces
// exactly (see the package comment); decode it with libjpeg-turbo.
var ErrUnsupported = errors.New("jpegx: not in the exactly reproduced subset")

// MaxPixels bounds the images a Decoder takes: its planes (and, for
// progressive files, coefficients: 2 bytes a sample) are kept between
// images, so one huge image would pin its memory.
const MaxPixels = 1 << 24

type component struct {
	id     byte
	h, v   int // sampling factors
	tq     int // quantisation table
	td, ta int // DC and AC Huffman tables of the scan
	bw, bh int // blocks across and down in the plane, MCU-padded
	stride int // plane row stride: bw·8 and a margin each side
	dw, dh int // downsampled (real) width and height in samples
	off    int // plane offset in Decoder.planes
	pred   int32

	// Progressive files only (progressive.go).
	rbw, rbh int // blocks holding real samples: a single-component scan's extent
	coff     int // offset of its first block in Decoder.coef
}

// Decoder decodes JPEGs into RGB. Its zero value is ready; it keeps its
// tables and buffers between images.
type Decoder struct {
	w, h       int
	nc         int
	comp       [3]component
	hmax, vmax int
	ri         int // restart interval in MCUs, 0 for none
	jfif       bool
	adobe      bool
	adobeXform byte
	sawSOF     bool

	qdef [4]bool
	qt   [4][64]int32 // zig-zag order

	hdef  [2][4]bool // [class][id]: defined in this image
	huff  [2][4]huffTable
	hraw  [2][4][]byte // the definitions the tables were built from
	br    bitReader
	blk   [64]int32
	plane []byte
	row   [2][]byte // upsampled Cb and Cr of one output row
	win   window    // the pixels asked for (DecodeRGBCrop)

	progState // progressive files (progressive.go)
}

func be16(b []byte) int { return int(binary.BigEndian.Uint16(b)) }

// DecodeRGB decodes data into dst, which must hold exactly width·height·3
// bytes of the image (its frame header gives the size). It returns
// ErrUnsupported, with dst's contents undefined, for any file outside the
// exact subset, corrupt ones included.
func (d *Decoder) DecodeRGB(data, dst []byte) error {
	d.win = window{}
	return d.decode(data, dst)
}

// DecodeRGBCrop is DecodeRGB for the w×h pixels whose top-left corner is
// (x, y): dst holds exactly w·h·3 bytes, the whole decode's pixels there.
// The file is read and checked in full as by DecodeRGB (so it takes and
// declines the same files, but for blocks wholly outside the crop); a
// progressive file's blocks outside the crop skip the IDCT, and only the
// crop's rows are upsampled and converted.
func (d *Decoder) DecodeRGBCrop(data, dst []byte, x, y, w, h int) error {
	if x < 0 || y < 0 || w <= 0 || h <= 0 {
		return ErrUnsupported
	}
	d.win = window{x, y, x + w, y + h, true}
	return d.decode(data, dst)
}

// window is the part of the image DecodeRGBCrop asked for; set is false
// for the whole image (DecodeRGB), which readSOF then fills in.
type window struct {
	x0, y0, x1, y1 int
	set            bool
}

func (d *Decoder) decode(data, dst []byte) error {
	if len(data) < 4 || data[0] != 0xff || data[1] != 0xd8 {
		return ErrUnsupported
	}
	d.ri, d.jfif, d.adobe, d.sawSOF, d.prog = 0, false, false, false, false
	d.qdef = [4]bool{}
	d.hdef = [2][4]bool{}
	for i := 2; ; {
		// A marker must follow the previous segment at once: libjpeg
		// skips stray bytes and fill 0xFFs with a warning or silently;
		// leave both to it.
		if i+2 > len(data) || data[i] != 0xff {
			return ErrUnsupported
		}
		m := data[i+1]
		if m == 0xd9 && d.prog { // EOI after the scans of a progressive file
			return d.progFinish(dst)
		}
		if i+4 > len(data) {
			return ErrUnsupported
		}
		n := be16(data[i+2:])
		if n < 2 || i+2+n > len(data) {
			return ErrUnsupported
		}
		seg := data[i+4 : i+2+n]
		i += 2 + n
		var ok bool
		switch {
		case m == 0xc0 || m == 0xc1: // baseline, extended sequential Huffman
			ok = d.readSOF(seg, dst)
		case m == 0xc2: // progressive Huffman
			ok = d.readSOF(seg, dst) && d.progStart()
		case m == 0xc4:
			ok = d.readDHT(seg)
		case m == 0xdb:
			ok = d.readDQT(seg)
		case m == 0xdd:
			ok = len(seg) == 2
			d.ri = be16(seg)
		case m == 0xe0:
			// libjpeg's examine_app0: a JFIF marker is at least 14 bytes.
			if len(seg) >= 14 && string(seg[:5]) == "JFIF\x00" {
				d.jfif = true
			}
			ok = true
		case m == 0xee:
			if len(seg) >= 12 && string(seg[:5]) == "Adobe" {
				d.adobe, d.adobeXform = true, seg[11]
			}
			ok = true
		case m > 0xe0 && m <= 0xef || m == 0xfe: // other APPn, COM
			ok = true
		case m == 0xda && d.prog:
			// One scan of several: decoded into the coefficients, and the
			// markers go on after it.
			next, good := d.progScan(seg, data, i)
			if !good {
				return ErrUnsupported
			}
			i = next
			continue
		case m == 0xda:
			if !d.sawSOF || !d.readSOS(seg) {
				return ErrUnsupported
			}
			return d.decodeScan(data, i, dst)
		}
		if !ok {
			return ErrUnsupported
		}
	}
}

// readSOF reads a frame header and lays out the component planes.
func (d *Decoder) readSOF(s, dst []byte) bool {
	if d.sawSOF || len(s) < 6 || s[0] != 8 {
		return false
	}
	d.sawSOF = true
	d.h, d.w, d.nc = be16(s[1:]), be16(s[3:]), int(s[5])
	if !d.win.set {
		d.win.x1, d.win.y1 = d.w, d.h
	}
	wn := d.win
	if d.w == 0 || d.h == 0 || d.w*d.h > MaxPixels || wn.x1 > d.w || wn.y1 > d.h ||
		len(dst) != (wn.x1-wn.x0)*(wn.y1-wn.y0)*3 ||
		(d.nc != 1 && d.nc != 3) || len(s) != 6+3*d.nc {
		return false
	}
	for i := range d.nc {
		c := &d.comp[i]
		c.id, c.h, c.v, c.tq = s[6+3*i], int(s[7+3*i]>>4), int(s[7+3*i]&15), int(s[8+3*i])
		if c.tq > 3 || c.h < 1 || c.h > 4 || c.v < 1 || c.v > 4 {
			return false
		}
	}
	if d.nc == 1 {
		// One component is one non-interleaved scan of single blocks,
		// whatever its sampling factors say.
		c := &d.comp[0]
		c.h, c.v, d.hmax, d.vmax = 1, 1, 1, 1
		c.dw, c.dh = d.w, d.h
		c.bw, c.bh = (d.w+7)/8, (d.h+7)/8
		d.grow(c.layout(0))
		return true
	}
	y, cb, cr := &d.comp[0], &d.comp[1], &d.comp[2]
	if cb.h != 1 || cb.v != 1 || cr.h != 1 || cr.v != 1 || y.h > 2 || y.v > y.h ||
		y.id == cb.id || y.id == cr.id || cb.id == cr.id {
		return false // 4:4:4, 4:2:2 and 4:2:0 only
	}
	d.hmax, d.vmax = y.h, y.v
	mx, my := (d.w+8*d.hmax-1)/(8*d.hmax), (d.h+8*d.vmax-1)/(8*d.vmax)
	off := 0
	for i := range 3 {
		c := &d.comp[i]
		c.dw = (d.w*c.h + d.hmax - 1) / d.hmax
		c.dh = (d.h*c.v + d.vmax - 1) / d.vmax
		c.bw, c.bh = mx*c.h, my*c.v
		off = c.layout(off)
	}
	if cb.dw <= 2 && d.hmax == 2 {
		return false // libjpeg upsamples so narrow an image without the filter
	}
	d.grow(off)
	return true
}

// layout places the component's plane at off in Decoder.plane and returns
// where the next one starts. Each row has a margin sample on either side,
// where the 4:2:0 upsampler finds the edge columns' stand-ins (see
// toRGB).
func (c *component) layout(off int) int {
	c.stride = c.bw*8 + 16 // 8-byte margins keep the IDCT's row stores aligned
	c.off = off + 8
	return off + c.stride*c.bh*8
}

func (d *Decoder) grow(n int) {
	if cap(d.plane) < n {
		d.plane = make([]byte, n)
	}
	d.plane = d.plane[:n]
}

// readDQT reads quantisation tables, 8- or 16-bit.
func (d *Decoder) readDQT(s []byte) bool {
	for len(s) > 0 {
		pq, tq := s[0]>>4, int(s[0]&15)
		if pq > 1 || tq > 3 {
			return false
		}
		s = s[1:]
		q := &d.qt[tq]
		if pq == 0 {
			if len(s) < 64 {
				return false
			}
			for k := range 64 {
				q[k] = int32(s[k])
			}
			s = s[64:]
		} else {
			if len(s) < 128 {
				return false
			}
			for k := range 64 {
				q[k] = int32(be16(s[2*k:]))
			}
			s = s[128:]
		}
		d.qdef[tq] = true
	}
	return true
}

// readDHT reads Huffman tables. A table whose definition equals the one
// its slot was last built from is not rebuilt: a dataset's files mostly
// share their encoder's tables.
func (d *Decoder) readDHT(s []byte) bool {
	for len(s) > 0 {
		if len(s) < 17 {
			return false
		}
		tc, th := int(s[0]>>4), int(s[0]&15)
		if tc > 1 || th > 3 {
			return false
		}
		n := 0
		for _, c := range s[1:17] {
			n += int(c)
		}
		if n > 256 || len(s) < 17+n {
			return false
		}
		def := s[:17+n]
		s = s[17+n:]
		if string(def) != string(d.hraw[tc][th]) {
			if !d.huff[tc][th].build(def[1:17], def[17:], tc == 0) {
				d.hraw[tc][th] = d.hraw[tc][th][:0]
				return false
			}
			d.hraw[tc][th] = append(d.hraw[tc][th][:0], def...)
		}
		d.hdef[tc][th] = true
	}
	return true
}

// readSOS reads a scan header: one scan holding every component in frame
// order, sequential (Ss=0, Se=63, no successive approximation).
func (d *Decoder) readSOS(s []byte) bool {
	if len(s) < 1 || int(s[0]) != d.nc || len(s) != 4+2*d.nc {
		return false
	}
	for i := range d.nc {
		c := &d.comp[i]
		if s[1+2*i] != c.id {
			return false
		}
		c.td, c.ta = int(s[2+2*i]>>4), int(s[2+2*i]&15)
		if c.td > 3 || c.ta > 3 || !d.hdef[0][c.td] || !d.hdef[1][c.ta] || !d.qdef[c.tq] {
			return false
		}
		c.pred = 0
	}
	t := s[1+2*d.nc:]
	if t[0] != 0 || t[1] != 63 || t[2] != 0 {
		return false
	}
	return d.isYCbCr()
}

// isYCbCr makes libjpeg's colour-space guess (jdapimin.c) from the markers
// before the first scan: greyscale, or three components it takes for
// YCbCr — the only colour spaces here.
func (d *Decoder) isYCbCr() bool {
	if d.nc == 3 {
		switch {
		case d.jfif:
		case d.adobe:
			if d.adobeXform != 1 {
				return false
			}
		case d.comp[0].id == 'R' && d.comp[1].id == 'G' && d.comp[2].id == 'B':
			return false
		}
	}
	return true
}
