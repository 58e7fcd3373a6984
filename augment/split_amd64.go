//go:build amd64 && !purego

package augment

import "golang.org/x/sys/cpu"

// split4Fwd and split4Rev map rows×steps steps of four interleaved RGB
// pixels into three planes of f32 bits (split_amd64.s); row r's source
// starts at s+r·sstride and its outputs at dc+r·dstride. split4Rev reads
// each row backwards from s (row 0's last four pixels).
//
//go:noescape
func split4Fwd(d0, d1, d2 *uint32, s *byte, lut *[3][256]uint32, rows, steps, dstride, sstride int)

//go:noescape
func split4Rev(d0, d1, d2 *uint32, s *byte, lut *[3][256]uint32, rows, steps, dstride, sstride int)

// haveSplitSIMD selects the assembly HWC → CHW path for f32 output (it
// uses VEX-encoded VMOVD/VPINSRD); the tests compare it to
// splitFwd/splitRev.
var haveSplitSIMD = cpu.X86.HasAVX

// splitRows32 is splitFwd/splitRev for f32 bits: the assembly does every
// row's first n/4·4 pixels in one call (a call per row would cost more
// than a short row), and the Go loops the ≤3 outputs left at each row's
// end.
func splitRows32(d0, d1, d2 []uint32, s [][3]byte, lut *[3][256]uint32, g *geom) {
	n, ow, w, rows := g.n, g.ow, g.w, g.rows
	q := n &^ 3
	if rows > 0 && q > 0 {
		// The assembly checks no bounds: the last row must fit.
		_, _, _ = d0[:(rows-1)*ow+n], d1[:(rows-1)*ow+n], d2[:(rows-1)*ow+n]
		_ = s[:(rows-1)*w+n]
		if g.flip { // output 0 is source pixel n-1: start at the last step
			split4Rev(&d0[0], &d1[0], &d2[0], &s[n-4][0], lut, rows, q/4, 4*ow, 3*w)
		} else {
			split4Fwd(&d0[0], &d1[0], &d2[0], &s[0][0], lut, rows, q/4, 4*ow, 3*w)
		}
	}
	splitTail(d0, d1, d2, s, lut, g, q)
}

// split16 is split4Fwd/split4Rev for uint8 output with identity tables:
// sixteen pixels per step, by byte shuffles (split_amd64.s).
//
//go:noescape
func split16(d0, d1, d2, s *byte, masks *[9][16]byte, rows, steps, dstride, sstride, sstep int)

// split8Masks are split16's shuffles: [0] for a forward row, [1] for a
// mirrored one.
var split8Masks = [2][9][16]byte{shuffles(false), shuffles(true)}

// shuffles: output j of a step is source pixel j (15-j when mirrored) of
// the step's sixteen, so plane c's byte j is byte 3·pixel+c of the 48
// loaded, which sits in load (3·pixel+c)/16.
func shuffles(mirror bool) [9][16]byte {
	var m [9][16]byte
	for i := range m {
		for j := range m[i] {
			m[i][j] = 0x80 // VPSHUFB writes zero
		}
	}
	for c := range 3 {
		for j := range 16 {
			px := j
			if mirror {
				px = 15 - j
			}
			k := 3*px + c
			m[3*c+k/16][j] = byte(k % 16)
		}
	}
	return m
}

// splitRows8 is splitFwd/splitRev for uint8 output, whose tables are the
// identity (runU8): the assembly does every row's first n/16·16 pixels,
// the Go loops the rest.
func splitRows8(d0, d1, d2 []byte, s [][3]byte, lut *[3][256]uint8, g *geom) {
	n, ow, w, rows := g.n, g.ow, g.w, g.rows
	q := n &^ 15
	if rows > 0 && q > 0 {
		// The assembly checks no bounds: the last row must fit.
		_, _, _ = d0[:(rows-1)*ow+n], d1[:(rows-1)*ow+n], d2[:(rows-1)*ow+n]
		_ = s[:(rows-1)*w+n]
		if g.flip { // output 0 is source pixel n-1: start at the last sixteen
			split16(&d0[0], &d1[0], &d2[0], &s[n-16][0], &split8Masks[1], rows, q/16, ow, 3*w, -48)
		} else {
			split16(&d0[0], &d1[0], &d2[0], &s[0][0], &split8Masks[0], rows, q/16, ow, 3*w, 48)
		}
	}
	splitTail(d0, d1, d2, s, lut, g, q)
}

// splitTail runs the Go loops on each row's outputs from q on, which the
// assembly left.
func splitTail[T elem](d0, d1, d2 []T, s [][3]byte, lut *[3][256]T, g *geom, q int) {
	if q == g.n {
		return
	}
	t := *g
	t.n = g.n - q
	if g.flip { // outputs q.. are source pixels n-1-q down to 0
		splitRev(d0[q:], d1[q:], d2[q:], s, lut, &t)
	} else {
		splitFwd(d0[q:], d1[q:], d2[q:], s[q:], lut, &t)
	}
}
