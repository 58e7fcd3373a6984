package jpegx

import "encoding/binary"

// lutBits is how many bits the first-level Huffman lookup resolves; the
// 8 to 9 bit codes of common tables all fit.
const lutBits = 9

// huffTable is a decoding table built like libjpeg's
// jpeg_make_d_derived_tbl, with its checks.
type huffTable struct {
	lut     [1 << lutBits]uint16 // length<<8 | symbol; 0: the code is longer
	fast    [1 << lutBits]int32  // AC: value<<16 | run<<8 | bits, when code and value fit; else 0
	maxcode [18]int32            // largest code of each length, -1 for none
	valptr  [17]int32            // vals index of a length's codes, less its first code
	vals    [256]uint8
}

// build makes the table from a DHT's 16 code counts and its symbols. It
// refuses what libjpeg refuses: codes that overflow their length (an
// all-ones code) and DC symbols above 15.
func (t *huffTable) build(counts, syms []byte, dc bool) bool {
	t.lut = [1 << lutBits]uint16{}
	code, p := int32(0), int32(0)
	for l := 1; l <= 16; l++ {
		n := int32(counts[l-1])
		if code+n >= 1<<l {
			return false // the last code of this length would be all ones
		}
		t.valptr[l] = p - code
		t.maxcode[l] = code + n - 1
		if n == 0 {
			t.maxcode[l] = -1
		}
		for i := range n {
			if l <= lutBits {
				c := int(code+i) << (lutBits - l)
				for j := range 1 << (lutBits - l) {
					t.lut[c+j] = uint16(l<<8) | uint16(syms[p+i])
				}
			}
		}
		p += n
		code += n
		code <<= 1
	}
	t.maxcode[17] = 1 << 30
	copy(t.vals[:], syms)
	// An AC code and its value bits together within lutBits decode with
	// one lookup (EOB and ZRL, s = 0, take the general path).
	t.fast = [1 << lutBits]int32{}
	for i, e := range t.lut {
		l, rs := uint(e>>8), uint(e&0xff)
		r, s := rs>>4, rs&15
		if dc || e == 0 || s == 0 || l+s > lutBits {
			continue
		}
		v := extend(uint64(i)<<(64-lutBits)<<l, s)
		t.fast[i] = v<<16 | int32(r)<<8 | int32(l+s)
	}
	if dc {
		for _, s := range syms {
			if s > 15 {
				return false
			}
		}
	}
	return true
}

// bitReader reads entropy-coded bits the way libjpeg's fill_bit_buffer
// does: 0xFF followed by fill 0xFFs and 0x00 is a data 0xFF; 0xFF
// followed by anything else is a marker, where reading stops and zeros
// are supplied. libjpeg warns when a decoder needs one of those zeros;
// fake counts them so the caller can tell.
type bitReader struct {
	data   []byte
	pos    int    // next byte to read
	acc    uint64 // bits, most significant first
	n      uint   // bits in acc
	fake   uint   // of which trailing zeros past a marker or the end
	marker int    // index of the marker code byte once hit, else -1
}

func (b *bitReader) reset(data []byte, pos int) {
	*b = bitReader{data: data, pos: pos, marker: -1}
}

// fill tops acc up to more than 56 bits.
func (b *bitReader) fill() {
	if b.pos+8 <= len(b.data) && b.marker < 0 {
		// Fast path: the next 8 bytes hold no 0xFF, so as many whole
		// bytes as fit go in at once.
		x := binary.BigEndian.Uint64(b.data[b.pos:])
		if v := ^x; (v-0x0101010101010101)&^v&0x8080808080808080 == 0 {
			nb := (64 - b.n) >> 3
			b.acc |= x >> (64 - 8*nb) << (64 - 8*nb) >> b.n
			b.n += 8 * nb
			b.pos += int(nb)
			return
		}
	}
	for b.n <= 56 {
		var c byte
		if b.marker < 0 && b.pos < len(b.data) {
			c = b.data[b.pos]
			if c != 0xff {
				b.pos++
			} else {
				j := b.pos + 1
				for j < len(b.data) && b.data[j] == 0xff {
					j++
				}
				if j < len(b.data) && b.data[j] == 0 {
					b.pos = j + 1
				} else {
					b.marker = j // j == len(data): cut off, never a valid end
					c = 0
					b.fake += 8
				}
			}
		} else {
			b.fake += 8
		}
		b.acc |= uint64(c) << (56 - b.n)
		b.n += 8
	}
}

// atMarker reports whether the bits consumed so far end the real data
// with less than a byte of padding left, followed by marker code m — what
// libjpeg reads without a warning at a restart or the end of the scan.
func (b *bitReader) atMarker(m byte) bool {
	b.fill()
	return b.marker >= 0 && b.marker < len(b.data) && b.data[b.marker] == m &&
		b.n >= b.fake && b.n-b.fake < 8
}

// zz maps zig-zag order to natural order.
var zz = [64]uint8{
	0, 1, 8, 16, 9, 2, 3, 10,
	17, 24, 32, 25, 18, 11, 4, 5,
	12, 19, 26, 33, 40, 48, 41, 34,
	27, 20, 13, 6, 7, 14, 21, 28,
	35, 42, 49, 56, 57, 50, 43, 36,
	29, 22, 15, 23, 30, 37, 44, 51,
	58, 59, 52, 45, 38, 31, 39, 46,
	53, 60, 61, 54, 47, 55, 62, 63,
}

// A dequantised coefficient must lie in [-deqLim, deqLim): libjpeg-turbo's
// SIMD IDCT multiplies and adds pairs in 16-bit lanes, so larger ones
// could wrap there. Real images stay near ±1,100.
const deqLim = 4096

// decodeBlock decodes one block's coefficients, dequantised, into blk in
// natural order (blk must be zero), and returns the last zig-zag index
// set (0 when only DC is) and whether libjpeg would have decoded the same
// without complaint. Out-of-range values and indexes are collected in
// bad and checked once at the end: the block is garbage then, and the
// caller drops the whole image.
func (b *bitReader) decodeBlock(blk *[64]int32, dc, ac *huffTable, q *[64]int32, pred *int32) (int, bool) {
	acc, n := b.acc, b.n
	if n < 32 {
		b.fill()
		acc, n = b.acc, b.n
	}
	// DC difference.
	s, l, ok := decodeSym(acc, dc)
	if !ok {
		return 0, false
	}
	acc <<= l
	n -= l
	p := *pred
	if s != 0 {
		p += extend(acc, s)
		acc <<= s
		n -= s
	}
	*pred = p
	v := p * q[0]
	bad := uint32(v + deqLim)
	blk[0] = v
	last := uint(0)
	for k := uint(1); k < 64; {
		if n < 32 {
			b.acc, b.n = acc, n
			b.fill()
			acc, n = b.acc, b.n
		}
		if e := ac.fast[acc>>(64-lutBits)]; e != 0 {
			k += uint(e>>8) & 0xff
			l := uint(e & 0xff)
			acc <<= l
			n -= l
			v := e >> 16 * q[k&63]
			bad |= uint32(v+deqLim) | uint32(k>>6)<<16 // k > 63: libjpeg writes past the block
			blk[zz[k&63]] = v
			last = k
			k++
			continue
		}
		rs, l, ok := decodeSym(acc, ac)
		if !ok {
			return 0, false
		}
		acc <<= l
		n -= l
		r, s := rs>>4, rs&15
		if s == 0 {
			if r != 15 {
				break // end of block
			}
			k += 16
			continue
		}
		k += r
		v := extend(acc, s) * q[k&63]
		acc <<= s
		n -= s
		bad |= uint32(v+deqLim) | uint32(k>>6)<<16
		blk[zz[k&63]] = v
		last = k
		k++
	}
	b.acc, b.n = acc, n
	return int(last), bad < 2*deqLim
}

// decodeSym decodes one symbol from the top of acc (at least 16 bits).
func decodeSym(acc uint64, t *huffTable) (sym, length uint, ok bool) {
	if e := t.lut[acc>>(64-lutBits)]; e != 0 {
		return uint(e & 0xff), uint(e >> 8), true
	}
	for l := lutBits + 1; l <= 16; l++ {
		c := int32(acc >> (64 - l))
		if c <= t.maxcode[l] {
			return uint(t.vals[c+t.valptr[l]]), uint(l), true
		}
	}
	return 0, 0, false // libjpeg: "bad Huffman code", decoded as zero
}

// extend reads an s-bit (1..16) magnitude from the top of acc (JPEG's
// EXTEND).
func extend(acc uint64, s uint) int32 {
	v := int32(acc >> (64 - s))
	if v < 1<<(s-1) {
		v += -1<<s + 1
	}
	return v
}
