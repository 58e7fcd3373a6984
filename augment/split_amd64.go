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
	if q == n {
		return
	}
	t := *g
	t.n = n - q
	if g.flip { // outputs q.. are source pixels n-1-q down to 0
		splitRev(d0[q:], d1[q:], d2[q:], s, lut, &t)
	} else {
		splitFwd(d0[q:], d1[q:], d2[q:], s[q:], lut, &t)
	}
}
