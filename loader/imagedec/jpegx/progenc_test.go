package jpegx

import (
	"bytes"
	"math/bits"
	"slices"
	"testing"
)

// A progressive re-encoder for the tests: it writes the quantised
// coefficients a Decoder read from a progressive file back with any scan
// script, as libjpeg's jcphuff.c encodes scans (EOB runs, correction bits
// buffered with them). A script that codes every coefficient fully must
// decode to the original file's pixels.

// scan is one scan of a script: frame component indexes, band, Ah, Al.
type scan struct {
	comps          []int
	ss, se, ah, al int
}

// coefSnapshot is what the encoder needs of a decoded file.
type coefSnapshot struct {
	header []byte // the file up to its first SOS
	comp   []component
	coef   []int16
}

// snapshot decodes a progressive file's scans with jpegx and keeps the
// coefficients: the file goes in without its EOI, so DecodeRGB stops
// before its IDCT consumes them.
func snapshot(t *testing.T, file []byte) coefSnapshot {
	t.Helper()
	if !bytes.HasSuffix(file, []byte{0xff, 0xd9}) {
		t.Fatal("no EOI at the end")
	}
	w, h, _ := frameSize(file)
	var d Decoder
	if err := d.DecodeRGB(file[:len(file)-2], make([]byte, w*h*3)); err != ErrUnsupported || !d.prog {
		t.Fatalf("file without its EOI: %v, progressive %v", err, d.prog)
	}
	sos := bytes.Index(file, []byte{0xff, 0xda})
	return coefSnapshot{file[:sos], slices.Clone(d.comp[:d.nc]), slices.Clone(d.coef)}
}

// encode writes the file: the header, universal Huffman tables, the
// scans, EOI. extra[i], when set, goes in before scan number i; raw[i],
// when set, writes scan i's data in place of the encoder.
func (s coefSnapshot) encode(script []scan, extra map[int][]byte, raw map[int]func(*progEnc)) []byte {
	out := append([]byte(nil), s.header...)
	out = append(out, universalDHT()...)
	for i, sc := range script {
		out = append(out, extra[i]...)
		out = append(out, 0xff, 0xda, 0, byte(6+2*len(sc.comps)), byte(len(sc.comps)))
		for _, ci := range sc.comps {
			out = append(out, s.comp[ci].id, 0x00)
		}
		out = append(out, byte(sc.ss), byte(sc.se), byte(sc.ah<<4|sc.al))
		e := &progEnc{}
		switch {
		case raw[i] != nil:
			raw[i](e)
		case sc.ss == 0:
			s.encodeDC(e, sc)
		case sc.ah == 0:
			s.encodeACFirst(e, sc)
		default:
			s.encodeACRefine(e, sc)
		}
		e.emitEOBRun()
		out = append(out, e.flush()...)
	}
	return append(out, 0xff, 0xd9)
}

// The tables every symbol has a code in: DC symbols 0..14 in 4 bits and
// 15 in 5; AC symbols 0x01 and 0x02 (a new coefficient of 1 or 2 bits) in
// 3, so that codes and values fit the decoder's fast table, 150 more in
// 8 bits and the last 104 in 12.
var (
	dcCounts = []byte{0, 0, 0, 15, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	dcSyms   = []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	acCounts = []byte{0, 0, 2, 0, 0, 0, 0, 150, 0, 0, 0, 104, 0, 0, 0, 0}
	acSyms   = func() []byte {
		s := []byte{1, 2}
		for v := range 256 {
			if v != 1 && v != 2 {
				s = append(s, byte(v))
			}
		}
		return s
	}()
	dcCodes, acCodes = huffCodes(dcCounts, dcSyms), huffCodes(acCounts, acSyms)
)

type huffCode struct {
	code uint64
	n    uint
}

// huffCodes assigns a DHT's canonical codes.
func huffCodes(counts, syms []byte) (t [256]huffCode) {
	code, i := uint64(0), 0
	for l := 1; l <= 16; l++ {
		for range counts[l-1] {
			t[syms[i]] = huffCode{code, uint(l)}
			code++
			i++
		}
		code <<= 1
	}
	return t
}

// universalDHT defines DC and AC table 0 as above.
func universalDHT() []byte {
	seg := slices.Concat([]byte{0x00}, dcCounts, dcSyms, []byte{0x10}, acCounts, acSyms)
	return append([]byte{0xff, 0xc4, byte((len(seg) + 2) >> 8), byte(len(seg) + 2)}, seg...)
}

type progEnc struct {
	out    []byte
	acc    uint64
	n      uint
	eobrun int
	be     []uint64 // correction bits waiting for the EOB run
}

func (e *progEnc) put(v uint64, n uint) {
	for i := int(n) - 1; i >= 0; i-- {
		e.acc = e.acc<<1 | v>>uint(i)&1
		if e.n++; e.n == 8 {
			e.out = append(e.out, byte(e.acc))
			if byte(e.acc) == 0xff {
				e.out = append(e.out, 0)
			}
			e.acc, e.n = 0, 0
		}
	}
}

// flush pads the last byte with ones.
func (e *progEnc) flush() []byte {
	if e.n > 0 {
		e.put(1<<(8-e.n)-1, 8-e.n)
	}
	return e.out
}

func (e *progEnc) dc(sym int) { e.put(dcCodes[sym].code, dcCodes[sym].n) }

func (e *progEnc) ac(sym int) { e.put(acCodes[sym].code, acCodes[sym].n) }

func (e *progEnc) emitEOBRun() {
	if e.eobrun == 0 {
		return
	}
	nb := bits.Len(uint(e.eobrun)) - 1
	e.ac(nb << 4)
	e.put(uint64(e.eobrun), uint(nb))
	e.eobrun = 0
	for _, b := range e.be {
		e.put(b, 1)
	}
	e.be = e.be[:0]
}

// blocks lists a scan's blocks (coefficient offsets) in data order.
func (s coefSnapshot) blocks(sc scan) []int {
	var out []int
	if len(sc.comps) == 1 {
		c := s.comp[sc.comps[0]]
		for by := range c.rbh {
			for bx := range c.rbw {
				out = append(out, c.coff+(by*c.bw+bx)*64)
			}
		}
		return out
	}
	c0 := s.comp[0]
	for y := range c0.bh / c0.v {
		for x := range c0.bw / c0.h {
			for _, ci := range sc.comps {
				c := s.comp[ci]
				for v := range c.v {
					for h := range c.h {
						out = append(out, c.coff+((y*c.v+v)*c.bw+x*c.h+h)*64)
					}
				}
			}
		}
	}
	return out
}

func (s coefSnapshot) encodeDC(e *progEnc, sc scan) {
	pred := map[int]int{}
	per := 0
	for _, ci := range sc.comps {
		c := s.comp[ci]
		per += c.h * c.v
	}
	for i, b := range s.blocks(sc) {
		v := int(s.coef[b]) >> sc.al
		if sc.ah != 0 {
			e.put(uint64(v&1), 1)
			continue
		}
		ci := sc.comps[0] // which component block i of its MCU belongs to
		if len(sc.comps) > 1 {
			j := i % per
			for _, cj := range sc.comps {
				if n := s.comp[cj].h * s.comp[cj].v; j >= n {
					j -= n
				} else {
					ci = cj
					break
				}
			}
		}
		diff := v - pred[ci]
		pred[ci] = v
		nb, x := magnitude(diff)
		e.dc(nb)
		e.put(x, uint(nb))
	}
}

// magnitude is a value's size category and its bits (negative ones less
// one).
func magnitude(v int) (int, uint64) {
	if v < 0 {
		nb := bits.Len(uint(-v))
		return nb, uint64(v-1) & (1<<nb - 1)
	}
	return bits.Len(uint(v)), uint64(v)
}

func (s coefSnapshot) encodeACFirst(e *progEnc, sc scan) {
	for _, b := range s.blocks(sc) {
		r := 0
		for k := sc.ss; k <= sc.se; k++ {
			v := int(s.coef[b+k])
			if v < 0 {
				v = -(-v >> sc.al)
			} else {
				v >>= sc.al
			}
			if v == 0 {
				r++
				continue
			}
			e.emitEOBRun()
			for ; r > 15; r -= 16 {
				e.ac(0xf0)
			}
			nb, x := magnitude(v)
			e.ac(r<<4 | nb)
			e.put(x, uint(nb))
			r = 0
		}
		if r > 0 {
			if e.eobrun++; e.eobrun == 0x7fff {
				e.emitEOBRun()
			}
		}
	}
}

func (s coefSnapshot) encodeACRefine(e *progEnc, sc scan) {
	for _, b := range s.blocks(sc) {
		var abs [64]int
		eob := 0
		for k := sc.ss; k <= sc.se; k++ {
			v := int(s.coef[b+k])
			abs[k] = max(v, -v) >> sc.al
			if abs[k] == 1 {
				eob = k
			}
		}
		r := 0
		var br []uint64 // this block's correction bits not yet written
		for k := sc.ss; k <= sc.se; k++ {
			a := abs[k]
			if a == 0 {
				r++
				continue
			}
			for ; r > 15 && k <= eob; r -= 16 {
				e.emitEOBRun()
				e.ac(0xf0)
				for _, x := range br {
					e.put(x, 1)
				}
				br = br[:0]
			}
			if a > 1 {
				br = append(br, uint64(a&1))
				continue
			}
			e.emitEOBRun()
			e.ac(r<<4 | 1)
			if s.coef[b+k] < 0 {
				e.put(0, 1)
			} else {
				e.put(1, 1)
			}
			for _, x := range br {
				e.put(x, 1)
			}
			br, r = br[:0], 0
		}
		if r > 0 || len(br) > 0 {
			e.eobrun++
			e.be = append(e.be, br...)
			if e.eobrun == 0x7fff || len(e.be) > 1000-64+1 {
				e.emitEOBRun()
			}
		}
	}
}
