package jpegx

import "math/bits"

// The four kinds of progressive scan, as libjpeg-turbo 2.1's jdphuff.c
// decodes them (decode_mcu_DC_first, _DC_refine, _AC_first, _AC_refine),
// into 16-bit coefficients in zig-zag order. Where libjpeg warns (a bad
// Huffman code, data cut short) or writes outside the scan's band (a run
// past its end), they return false and the file goes to libjpeg. Before
// each code they refill the bit buffer (to more than 56 bits) when it
// holds fewer than 32, enough for the code (16) and its value or run
// bits (15); the correction bits after it are taken with a test of their
// own.

// blockOrder is the order of a scan's blocks in its data: MCU by MCU,
// each component's blocks in turn, for several components; row by row
// over the blocks holding real samples for one. Block i of MCU (x, y) is
// block number base[i] + y·row[i] + x·col[i] of Decoder.coef.
type blockOrder struct {
	mx, my         int
	n              int // blocks in an MCU
	ci             [10]int
	base, row, col [10]int
}

func (d *Decoder) order(p *progScanParams) (o blockOrder) {
	if p.n == 1 {
		c := &d.comp[p.comp[0]]
		o.mx, o.my, o.n = c.rbw, c.rbh, 1
		o.ci[0], o.base[0], o.row[0], o.col[0] = p.comp[0], c.coff/64, c.bw, 1
		return o
	}
	// Every component's bw is the MCU count across times its h.
	o.mx, o.my = d.comp[0].bw/d.comp[0].h, d.comp[0].bh/d.comp[0].v
	for _, ci := range p.comp[:p.n] {
		c := &d.comp[ci]
		for v := range c.v {
			for h := range c.h { // at most 4+1+1 blocks (readSOF)
				o.ci[o.n], o.base[o.n] = ci, c.coff/64+v*c.bw+h
				o.row[o.n], o.col[o.n] = c.v*c.bw, c.h
				o.n++
			}
		}
	}
	return o
}

// dcFirst decodes a first DC scan: each block's DC difference, added to
// its component's prediction and scaled by 2^Al.
func (d *Decoder) dcFirst(p *progScanParams) bool {
	br := &d.br
	o := d.order(p)
	var pred [10]int32 // by MCU block: one per component is kept
	var tab [10]*huffTable
	last := [10]int{} // the MCU block whose prediction a block follows
	for i := range o.n {
		tab[i] = &d.huff[0][d.comp[o.ci[i]].td]
		last[i] = i
		if i > 0 && o.ci[i] == o.ci[i-1] {
			last[i] = last[i-1]
		}
	}
	al := uint(p.al)
	acc, n := br.acc, br.n
	for y := range o.my {
		for x := range o.mx {
			for i := range o.n {
				if n < 32 {
					br.acc, br.n = acc, n
					br.fill()
					acc, n = br.acc, br.n
				}
				s, l, ok := decodeSym(acc, tab[i])
				if !ok {
					return false
				}
				acc <<= l
				n -= l
				v := pred[last[i]]
				if s != 0 {
					v += extend(acc, s)
					acc <<= s
					n -= s
				}
				// libjpeg stops at an int overflow (JERR_BAD_DCT_COEF);
				// stop far before, where no image goes.
				if uint32(v+1<<24) > 1<<25 {
					return false
				}
				pred[last[i]] = v
				d.coef[(o.base[i]+y*o.row[i]+x*o.col[i])*64] = int16(uint32(v) << al)
			}
		}
	}
	br.acc, br.n = acc, n
	return true
}

// dcRefine decodes a DC refinement scan: one more bit of each DC.
func (d *Decoder) dcRefine(p *progScanParams) bool {
	br := &d.br
	o := d.order(p)
	p1 := int16(1) << p.al
	acc, n := br.acc, br.n
	for y := range o.my {
		for x := range o.mx {
			if n < 10 {
				br.acc, br.n = acc, n
				br.fill()
				acc, n = br.acc, br.n
			}
			for i := range o.n {
				d.coef[(o.base[i]+y*o.row[i]+x*o.col[i])*64] |= p1 & -int16(acc>>63)
				acc <<= 1
			}
			n -= uint(o.n)
		}
	}
	br.acc, br.n = acc, n
	return true
}

// acFirst decodes a first AC scan of one component: band Ss..Se of each
// block, scaled by 2^Al, with runs of empty blocks (EOBRUN).
func (d *Decoder) acFirst(c *component, p *progScanParams) bool {
	br := &d.br
	t := &d.huff[1][c.ta]
	acc, n := br.acc, br.n
	ss, se, al := p.ss, p.se, uint(p.al)
	eobrun := 0
	for by := range c.rbh {
		b0 := c.coff/64 + by*c.bw
		for bx := range c.rbw {
			if eobrun > 0 {
				eobrun--
				continue
			}
			cf := (*[64]int16)(d.coef[(b0+bx)*64:])
			nz := d.nz[b0+bx]
			for k := ss; k <= se; k++ {
				if n < 32 {
					br.acc, br.n = acc, n
					br.fill()
					acc, n = br.acc, br.n
				}
				var v int16
				if e := t.fast[acc>>(64-lutBits)]; e != 0 {
					// Code and value in one lookup.
					k += int(e>>8) & 0xff
					l := uint(e & 0xff)
					acc <<= l
					n -= l
					v = int16(uint32(e>>16) << al)
				} else {
					rs, l, ok := decodeSym(acc, t)
					if !ok {
						return false
					}
					acc <<= l
					n -= l
					r, s := int(rs>>4), rs&15
					if s == 0 {
						if r == 15 { // ZRL: 16 zeros
							k += 15
							continue
						}
						eobrun = 1 << r // EOBr: this block and 2^r-1+bits more
						if r > 0 {
							eobrun += int(acc >> (64 - r))
							acc <<= r
							n -= uint(r)
						}
						eobrun--
						break
					}
					k += r
					v = int16(uint32(extend(acc, s)) << al)
					acc <<= s
					n -= s
				}
				// Past the band libjpeg writes outside it; a value shifted
				// out of 16 bits is a zero nz would miss.
				if k > se || v == 0 {
					return false
				}
				cf[k&63] = v
				nz |= 1 << (k & 63)
			}
			d.nz[b0+bx] = nz
		}
	}
	br.acc, br.n = acc, n
	return true
}

// acRefine decodes an AC refinement scan of one component: in band
// Ss..Se of each block, new coefficients of ±2^Al, and a correction bit
// for each coefficient already nonzero, up to the end of the band or of
// a run of blocks with no new coefficients (EOBRUN).
//
// Every coefficient nonzero before the scan takes exactly one correction
// bit, in zig-zag order, and nothing else changes it in the scan: so the
// bits are collected as they come, between the codes, and applied once
// the block is done.
func (d *Decoder) acRefine(c *component, p *progScanParams) bool {
	br := &d.br
	t := &d.huff[1][c.ta]
	acc, n := br.acc, br.n
	ss, se := p.ss, p.se
	band := ^uint64(0) >> (63 - se) &^ (1<<ss - 1) // bits ss..se
	p1 := int16(1) << p.al
	eobrun := 0
	for by := range c.rbh {
		b0 := c.coff/64 + by*c.bw
		for bx := range c.rbw {
			cf := (*[64]int16)(d.coef[(b0+bx)*64:])
			nz := d.nz[b0+bx]
			old := nz & band // the coefficients taking correction bits
			cw := uint64(0)  // their bits so far, the last lowest
			k := ss
			for eobrun == 0 && k <= se {
				if n < 32 {
					br.acc, br.n = acc, n
					br.fill()
					acc, n = br.acc, br.n
				}
				var r int
				var v int16
				if e := t.fast[acc>>(64-lutBits)]; e != 0 {
					// A run and a new coefficient, its sign bit included.
					r = int(e>>8) & 0xff
					l := uint(e & 0xff)
					acc <<= l
					n -= l
					if x := e >> 16; x == 1 || x == -1 {
						v = int16(x) * p1
					} else {
						return false // JWRN_HUFF_BAD_CODE: more than 1 bit
					}
				} else {
					rs, l, ok := decodeSym(acc, t)
					if !ok {
						return false
					}
					acc <<= l
					n -= l
					r = int(rs >> 4)
					switch rs & 15 {
					case 1:
						v = -p1
						if acc>>63 != 0 {
							v = p1
						}
						acc <<= 1
						n--
					case 0:
						if r != 15 { // EOBr; else ZRL, v = 0
							eobrun = 1 << r
							if r > 0 {
								eobrun += int(acc >> (64 - r))
								acc <<= r
								n -= uint(r)
							}
						}
					default:
						return false // JWRN_HUFF_BAD_CODE
					}
					if eobrun != 0 {
						break
					}
				}
				// Skip r zero coefficients: the new one (or the end of a
				// ZRL) is the next zero, or past the band when there are
				// too few. The nonzero ones on the way take a correction
				// bit each.
				zeros := (^nz & band) >> (k & 63)
				end := k + int(selectByte[zeros&0xff][r&15])
				if end-k == 8 { // not among the next 8
					for ; r > 0; r-- {
						zeros &= zeros - 1
					}
					end = se + 1
					if zeros != 0 {
						end = k + bits.TrailingZeros64(zeros)
					}
				}
				// (Shift counts masked to 63 compile to plain shifts.)
				nc := uint(bits.OnesCount64(old & (^uint64(0) >> ((64 - end) & 63)) >> (k & 63)))
				if nc > n {
					var b uint64
					b, acc, n = br.take(acc, n, nc)
					cw = cw<<nc | b
				} else {
					cw = cw<<(nc&63) | acc>>((63-nc)&63)>>1 // none for nc = 0
					acc <<= nc & 63
					n -= nc
				}
				k = end
				if v != 0 {
					if k > se {
						return false // libjpeg writes outside the band
					}
					cf[k&63] = v
					nz |= 1 << (k & 63)
				}
				k++
			}
			if eobrun > 0 {
				// The rest of the band: corrections only.
				nc := uint(bits.OnesCount64(old >> (k & 63)))
				if nc > n {
					var b uint64
					b, acc, n = br.take(acc, n, nc)
					cw = cw<<nc | b
				} else {
					cw = cw<<(nc&63) | acc>>((63-nc)&63)>>1
					acc <<= nc & 63
					n -= nc
				}
				eobrun--
			}
			if old != 0 {
				// Apply the bits, the first at the top of cw now: a 1 adds
				// 2^Al (p1) to a coefficient's magnitude unless that bit
				// is set already. Branch-free.
				cw <<= 64 - bits.OnesCount64(old)
				for m := old; m != 0; m &= m - 1 {
					k := bits.TrailingZeros64(m) & 63
					x := cf[k]
					sign := x >> 15
					add := -int16(cw>>63) & ^(x & p1 * -1 >> 15)
					cf[k] = x + ((p1^sign)-sign)&add
					cw <<= 1
				}
			}
			d.nz[b0+bx] = nz
		}
	}
	br.acc, br.n = acc, n
	return true
}

// take returns the next c (up to 63) bits of the caller's bit buffer acc
// (n bits, fewer than c) as a number, with the buffer less them.
func (b *bitReader) take(acc uint64, n, c uint) (uint64, uint64, uint) {
	b.acc, b.n = acc, n
	b.fill()
	if c <= b.n {
		v := b.acc >> (64 - c)
		b.acc <<= c
		b.n -= c
		return v, b.acc, b.n
	}
	hi := b.acc >> 32 // more than the buffer holds: 32 bits first
	b.acc <<= 32
	b.n -= 32
	b.fill()
	v := hi<<(c-32) | b.acc>>(64-(c-32))
	b.acc <<= c - 32
	b.n -= c - 32
	return v, b.acc, b.n
}

// selectByte[v][r] is the index of v's set bit number r (from 0, lowest
// first), 8 if v has r or fewer.
var selectByte = func() (t [256][16]uint8) {
	for v := range 256 {
		for r := range t[v] {
			t[v][r] = 8
		}
		r := 0
		for i := range 8 {
			if v>>i&1 != 0 {
				t[v][r] = uint8(i)
				r++
			}
		}
	}
	return t
}()
