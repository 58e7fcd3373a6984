package jpegx

import "math/bits"

// Progressive JPEGs (SOF2, Huffman). Each scan adds a band of
// coefficients, or one more bit of them, to a whole-image coefficient
// buffer; after the last scan the blocks go through the same
// dequantisation check, IDCT and colour conversion as a sequential file's.
// The scan decoders (progscan.go) follow libjpeg-turbo 2.1's jdphuff.c
// step for step, in its 16-bit coefficients, so that even odd but valid
// streams give its values.

// maxScans is TurboJPEG's TJFLAG_LIMITSCANS limit: a file with more scans
// is an error there.
const maxScans = 500

// progState is a Decoder's progressive state.
type progState struct {
	prog  bool
	scans int
	// coef holds every component's MCU-padded blocks, each 64
	// coefficients in zig-zag order, as libjpeg's JCOEF. It is kept
	// between images and cleared for each.
	coef []int16
	// nz has a bit set for each nonzero AC coefficient of a block (bit k
	// for zig-zag index k), so that the refinement scans and the IDCT
	// skip zeros without reading them.
	nz []uint64
	// dirty is how much of coef (and of nz, in blocks) may hold values:
	// an image's blocks are zeroed as its IDCT consumes them, so only an
	// image given up leaves some.
	dirty int
	// bits is libjpeg's coef_bits: per component and zig-zag index, the
	// Al of the last scan that coded it, -1 before any.
	bits [3][64]int8
	// qlat holds each component's quantisation table (zig-zag) as it was
	// at the component's first scan: libjpeg latches it then
	// (jdinput.c latch_quant_tables) and ignores later redefinitions.
	qlat    [3][64]int32
	latched [3]bool
}

// progScanParams is one progressive scan's header.
type progScanParams struct {
	n              int    // components in the scan
	comp           [3]int // their frame indexes, in frame order
	ss, se, ah, al int
}

// progStart sets a progressive frame up after readSOF: the coefficient
// buffer and the progression state.
func (d *Decoder) progStart() bool {
	d.prog, d.scans = true, 0
	off := 0
	for i := range d.nc {
		c := &d.comp[i]
		c.rbw, c.rbh = (c.dw+7)/8, (c.dh+7)/8
		c.coff = off
		off += c.bw * c.bh * 64
		d.bits[i] = [64]int8{}
		for k := range d.bits[i] {
			d.bits[i][k] = -1
		}
		d.latched[i] = false
	}
	// libjpeg's coefficient arrays start zeroed.
	if cap(d.coef) < off {
		d.coef = make([]int16, off)
		d.nz = make([]uint64, off/64)
	} else {
		clear(d.coef[:d.dirty])
		clear(d.nz[:d.dirty/64])
	}
	d.coef, d.nz = d.coef[:off], d.nz[:off/64]
	d.dirty = off
	return true
}

// progScan reads the scan header s and decodes the scan whose data starts
// at pos; it returns where the marker after the scan starts.
func (d *Decoder) progScan(s, data []byte, pos int) (int, bool) {
	var p progScanParams
	if d.scans++; d.scans > maxScans || !d.readProgSOS(s, &p) {
		return 0, false
	}
	// Restart intervals are left to libjpeg: they reset the EOB run and
	// the DC predictions mid-scan, which nothing here tests yet.
	if d.ri != 0 {
		return 0, false
	}
	br := &d.br
	br.reset(data, pos)
	var ok bool
	switch {
	case p.ss == 0 && p.ah == 0:
		ok = d.dcFirst(&p)
	case p.ss == 0:
		ok = d.dcRefine(&p)
	case p.ah == 0:
		ok = d.acFirst(&d.comp[p.comp[0]], &p)
	default:
		ok = d.acRefine(&d.comp[p.comp[0]], &p)
	}
	if !ok || !br.atSomeMarker() {
		return 0, false
	}
	return br.marker - 1, true // the 0xFF before the marker's code
}

// readProgSOS reads a progressive scan header and checks it as libjpeg's
// get_sos and start_pass_phuff_decoder do, declining what they reject or
// warn about; it updates the progression state.
func (d *Decoder) readProgSOS(s []byte, p *progScanParams) bool {
	if len(s) < 1 {
		return false
	}
	p.n = int(s[0])
	if p.n < 1 || p.n > d.nc || len(s) != 4+2*p.n {
		return false
	}
	if d.scans == 1 && !d.isYCbCr() {
		return false // libjpeg guesses the colour space at the first scan
	}
	prev := -1
	for i := range p.n {
		ci := -1
		for j := range d.nc { // the ids are distinct (readSOF)
			if d.comp[j].id == s[1+2*i] {
				ci = j
			}
		}
		if ci <= prev {
			return false // unknown, repeated, or out of frame order
		}
		prev = ci
		p.comp[i] = ci
		c := &d.comp[ci]
		c.td, c.ta = int(s[2+2*i]>>4), int(s[2+2*i]&15)
	}
	t := s[1+2*p.n:]
	p.ss, p.se, p.ah, p.al = int(t[0]), int(t[1]), int(t[2]>>4), int(t[2]&15)
	dc := p.ss == 0
	// JERR_BAD_PROGRESSION: a DC band is coefficient 0 alone, an AC band
	// lies in 1..63 and has one component, a refinement adds one bit.
	if dc && p.se != 0 || !dc && (p.ss > p.se || p.se > 63 || p.n != 1) ||
		p.ah != 0 && p.al != p.ah-1 || p.al > 13 {
		return false
	}
	for _, ci := range p.comp[:p.n] {
		c, bits := &d.comp[ci], &d.bits[ci]
		// JWRN_BOGUS_PROGRESSION: AC before DC, or a scan whose Ah is not
		// the Al that last coded each of its coefficients.
		if !dc && bits[0] < 0 {
			return false
		}
		for k := p.ss; k <= p.se; k++ {
			if int(max(bits[k], 0)) != p.ah {
				return false
			}
			bits[k] = int8(p.al)
		}
		switch {
		case dc && p.ah == 0: // DC refinement needs no table
			if c.td > 3 || !d.hdef[0][c.td] {
				return false
			}
		case !dc:
			if c.ta > 3 || !d.hdef[1][c.ta] {
				return false
			}
		}
		if !d.latched[ci] {
			if !d.qdef[c.tq] {
				return false
			}
			d.qlat[ci], d.latched[ci] = d.qt[c.tq], true
		}
	}
	return true
}

// atSomeMarker reports whether the bits consumed so far end the real data
// with less than a byte of padding left, followed by a marker: the end of
// a scan as libjpeg reads it without a warning.
func (b *bitReader) atSomeMarker() bool {
	b.fill()
	return b.marker >= 0 && b.marker < len(b.data) && b.n >= b.fake && b.n-b.fake < 8
}

// progFinish turns the coefficients into samples and the samples into
// RGB in dst, after the last scan.
func (d *Decoder) progFinish(dst []byte) error {
	// libjpeg-turbo smooths the blocks of the output (jdcoefct.c
	// decompress_smooth_data) when the DC or any of the first 9 AC
	// coefficients (zig-zag) of a component lacks bits: leave such files,
	// and files with a component never coded, to it.
	for ci := range d.nc {
		for k := range 10 {
			if d.bits[ci][k] != 0 {
				return ErrUnsupported
			}
		}
	}
	d.blk = [64]int32{} // idctCoef keeps it zero
	for ci := range d.nc {
		c := &d.comp[ci]
		q := &d.qlat[ci]
		// The blocks the window reads (DecodeRGBCrop); the others are
		// only cleared for the next image.
		bx0, bx1 := d.winBlocks(d.win.x0, d.win.x1, c.h, d.hmax, c.dw, c.rbw)
		by0, by1 := d.winBlocks(d.win.y0, d.win.y1, c.v, d.vmax, c.dh, c.rbh)
		for by := range c.rbh {
			b0 := c.coff/64 + by*c.bw
			for bx := range c.rbw {
				cf := (*[64]int16)(d.coef[(b0+bx)*64:])
				if by >= by0 && by < by1 && bx >= bx0 && bx < bx1 &&
					!d.idctCoef(cf, d.nz[b0+bx], q, d.plane[c.off+(by*c.stride+bx)*8:], c.stride) {
					return ErrUnsupported
				}
				*cf, d.nz[b0+bx] = [64]int16{}, 0
			}
			// The MCU padding's blocks: DC only, from interleaved scans.
			clear(d.coef[(b0+c.rbw)*64 : (b0+c.bw)*64])
		}
		clear(d.coef[(c.coff/64+c.rbh*c.bw)*64 : c.coff+c.bh*c.bw*64])
	}
	d.dirty = 0 // all zero again
	d.toRGB(dst)
	return nil
}

// winBlocks returns the blocks [b0, b1) of one axis of a component that
// the window's pixels [p0, p1) read: its samples scaled by the sampling
// factor f of fmax, one more on either side for the upsampler's
// neighbours when the component is subsampled, within the n real samples
// and nb real blocks.
func (d *Decoder) winBlocks(p0, p1, f, fmax, n, nb int) (int, int) {
	s0, s1 := p0*f/fmax, (p1*f+fmax-1)/fmax
	if f < fmax {
		s0, s1 = s0-1, s1+1
	}
	s0, s1 = max(s0, 0), min(s1, n)
	if s1 <= s0 {
		return 0, 0
	}
	return s0 / 8, min((s1-1)/8+1, nb)
}

// idctCoef dequantises one block of coefficients (zig-zag; nz marks the
// nonzero AC ones) and transforms it into dst, with the sequential
// decoder's range checks (deqLim, idct).
func (d *Decoder) idctCoef(cf *[64]int16, nz uint64, q *[64]int32, dst []byte, stride int) bool {
	v := int32(cf[0]) * q[0]
	bad := uint32(v + deqLim)
	if nz == 0 {
		if bad >= 2*deqLim {
			return false
		}
		idctDC(dst, stride, v)
		return true
	}
	blk := &d.blk // zero between blocks
	blk[0] = v
	for m := nz; m != 0; m &= m - 1 {
		k := bits.TrailingZeros64(m) & 63
		v := int32(cf[k]) * q[k]
		bad |= uint32(v + deqLim)
		blk[zz[k]] = v
	}
	ok := bad < 2*deqLim && idct(dst, stride, blk)
	*blk = [64]int32{}
	return ok
}
