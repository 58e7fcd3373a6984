package jpegx

// lutBits is how many bits the first-level Huffman lookup resolves; the
// 8 to 9 bit codes of common tables all fit.
const lutBits = 9

// huffTable is a decoding table built like libjpeg's
// jpeg_make_d_derived_tbl, with its checks.
type huffTable struct {
	lut     [1 << lutBits]uint16 // length<<8 | symbol; 0: the code is longer
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
		if code >= 1<<l {
			return false // the last code of this length would be all ones
		}
		code <<= 1
	}
	t.maxcode[17] = 1 << 30
	copy(t.vals[:], syms)
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

// maxDeq bounds a dequantised coefficient: libjpeg-turbo's SIMD IDCT
// multiplies and adds pairs in 16-bit lanes, so larger ones could wrap
// there. Real images stay near ±1,100.
const maxDeq = 4095

// decodeBlock decodes one block's coefficients, dequantised, into blk in
// natural order (blk must be zero), and returns the last zig-zag index
// set (0 when only DC is) and whether libjpeg would have decoded the same
// without complaint.
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
	if uint32(v+maxDeq) > 2*maxDeq {
		return 0, false
	}
	blk[0] = v
	last := 0
	for k := 1; k < 64; {
		if n < 32 {
			b.acc, b.n = acc, n
			b.fill()
			acc, n = b.acc, b.n
		}
		rs, l, ok := decodeSym(acc, ac)
		if !ok {
			return 0, false
		}
		acc <<= l
		n -= l
		r, s := int(rs>>4), rs&15
		if s == 0 {
			if r != 15 {
				break // end of block
			}
			k += 16
			continue
		}
		k += r
		if k > 63 {
			return 0, false // libjpeg writes past the block's end into 63
		}
		v := extend(acc, s) * q[k]
		acc <<= s
		n -= s
		if uint32(v+maxDeq) > 2*maxDeq {
			return 0, false
		}
		blk[zz[k]] = v
		last = k
		k++
	}
	b.acc, b.n = acc, n
	return last, true
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
