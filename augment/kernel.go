package augment

import (
	"unsafe"

	"github.com/loaderd/loaderd/client/sample"
)

// The fused kernel. The crop window of an output image meets the source
// image in a rectangle: `rows` output rows of `n` in-image pixels each,
// starting at output pixel `start` and read from source pixel `src`
// onwards (backwards within each row when mirrored). Everything else is
// fill. One call writes the rectangle plane by plane (or pixel by pixel for
// HWC output), then the fill around it, which for a plane is one run before
// the first segment, one run between consecutive segments (the right fill
// of one row joins the left fill of the next) and one after the last.
//
// Values go through per-channel lookup tables of the final element's bits,
// so the inner loops are a source load, a table load and a store. Each loop
// nest is one leaf function with few live values: Go's calling convention
// has no callee-saved registers, so a call per row would cost more than the
// row's pixels. Bounds checks are per row and per step of eight elements
// (four pixels), never per element outside the short row tails (checked
// with go build -gcflags=-d=ssa/check_bce ./augment/).

// elem is the storage of one output element: u8, f16/bf16 bits, f32 bits.
// The byte arrays serve a dst that is not aligned to the element size: they
// are valid at any address but the compiler moves them through memory, so
// that path is about half as fast.
type elem interface {
	~uint8 | ~uint16 | ~uint32 | [2]byte | [4]byte
}

// geom is the geometry of one Apply call, in pixels.
type geom struct {
	c       int // channels
	ip, op  int // pixels per input and output plane
	w, ow   int // input and output row width
	rows, n int // in-image output rows and pixels per row (0, 0 when none)
	start   int // output index of the first in-image pixel
	src     int // input index of the lowest source pixel of that row
	flip    bool
	in, out sample.Layout
}

// run writes one output image. With one channel HWC and CHW are the same
// bytes, so the plane loops serve both.
func run[T elem](d []T, src []byte, lut *[3][256]T, fill *[3]T, g *geom) {
	if g.c == 1 || g.out == sample.CHW {
		for c := range g.c {
			fillPlane(d[c*g.op:(c+1)*g.op], fill[c], g)
		}
	} else {
		fillPixels(pixels(d[:3*g.op]), fill, g)
	}
	if g.rows == 0 {
		return
	}
	switch {
	case g.c == 1 || g.in == sample.CHW && g.out == sample.CHW:
		for c := range g.c {
			dp, sp := d[c*g.op+g.start:(c+1)*g.op], src[c*g.ip+g.src:(c+1)*g.ip]
			if g.flip {
				planeRev(dp, sp, &lut[c], g.rows, g.n, g.ow, g.w)
			} else {
				planeFwd(dp, sp, &lut[c], g.rows, g.n, g.ow, g.w)
			}
		}
	case g.out == sample.CHW: // HWC → CHW
		d0, d1, d2 := d[g.start:g.op], d[g.op+g.start:2*g.op], d[2*g.op+g.start:3*g.op]
		// f32 output (the ImageNet case) has an assembly kernel, 2–3×
		// the Go loops (split_amd64.s). The table's type tells T ==
		// uint32 without boxing the slices (which could allocate); u32s
		// is then a no-op cast.
		if l, ok := any(lut).(*[3][256]uint32); ok && haveSplitSIMD {
			splitRows32(u32s(d0), u32s(d1), u32s(d2), pixels(src[3*g.src:]), l, g)
			return
		}
		if g.flip {
			splitRev(d0, d1, d2, pixels(src[3*g.src:]), lut, g)
		} else {
			splitFwd(d0, d1, d2, pixels(src[3*g.src:]), lut, g)
		}
	case g.in == sample.CHW: // CHW → HWC
		dp := pixels(d[3*g.start : 3*g.op])
		s0, s1, s2 := src[g.src:g.ip], src[g.ip+g.src:2*g.ip], src[2*g.ip+g.src:3*g.ip]
		if g.flip {
			mergeRev(dp, s0, s1, s2, lut, g)
		} else {
			mergeFwd(dp, s0, s1, s2, lut, g)
		}
	default: // HWC → HWC
		dp, sp := pixels(d[3*g.start:3*g.op]), pixels(src[3*g.src:])
		if g.flip {
			pixRev(dp, sp, lut, g)
		} else {
			pixFwd(dp, sp, lut, g)
		}
	}
}

// u32s views a []T as []uint32; only for T = uint32 (same layout).
func u32s[T elem](s []T) []uint32 {
	return unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(s))), len(s))
}

// runU8 is run for uint8 output, whose tables are the identity (no value
// op applies to u8, see buildTables): interleaved rows are copied, or
// reversed pixel by pixel when mirrored, with no table loads. The staged
// chains' first stage is this, once per sample.
func runU8(d, src []byte, lut *[3][256]uint8, fill *[3]uint8, g *geom) {
	if g.rows > 0 && g.c == 3 && g.in == sample.HWC && g.out == sample.CHW && haveSplitSIMD {
		// u8 CHW is what crosses hosts for normalize_on: the table loads
		// of run's Go loops cost 8% of a pool daemon's CPU.
		for c := range 3 {
			fillPlane(d[c*g.op:(c+1)*g.op], fill[c], g)
		}
		splitRows8(d[g.start:g.op], d[g.op+g.start:2*g.op], d[2*g.op+g.start:3*g.op], pixels(src[3*g.src:]), lut, g)
		return
	}
	if g.rows == 0 || g.c != 3 || g.in != sample.HWC || g.out != sample.HWC {
		run(d, src, lut, fill, g)
		return
	}
	fillPixels(pixels(d[:3*g.op]), fill, g)
	dp, sp := pixels(d[3*g.start:3*g.op]), pixels(src[3*g.src:])
	n, ow, w := g.n, g.ow, g.w
	for r := range g.rows {
		dr, sr := dp[r*ow:r*ow+n], sp[r*w:r*w+n]
		if g.flip {
			revPixels(dr, sr)
		} else {
			copy(dr, sr)
		}
	}
}

// revPixels writes s's pixels into d in reverse order, four per step.
func revPixels(d, s [][3]byte) {
	s = s[:len(d)]
	m, i := len(d), 0
	for ; i+4 <= m; i += 4 {
		pp, dd := (*[4][3]byte)(s[m-i-4:m-i]), (*[4][3]byte)(d[i:i+4])
		dd[0], dd[1], dd[2], dd[3] = pp[3], pp[2], pp[1], pp[0]
	}
	for ; i < m; i++ {
		d[i] = s[m-1-i]
	}
}

// pixels views an interleaved 3-channel buffer as whole pixels, so loops
// index one pixel per step. The element alignment is unchanged, which keeps
// the conversion valid.
func pixels[T elem](s []T) [][3]T {
	if len(s) < 3 {
		return nil
	}
	return unsafe.Slice((*[3]T)(unsafe.Pointer(unsafe.SliceData(s))), len(s)/3)
}

// fillPlane writes f everywhere in a plane outside the in-image rectangle.
func fillPlane[T elem](d []T, f T, g *geom) {
	if g.rows == 0 {
		fill1(d, f)
		return
	}
	fill1(d[:g.start], f)
	i := g.start + g.n
	for range g.rows - 1 {
		fill1(d[i:i+g.ow-g.n], f)
		i += g.ow
	}
	fill1(d[i:], f)
}

// fillPixels is fillPlane for interleaved output.
func fillPixels[T elem](d [][3]T, f *[3]T, g *geom) {
	v := *f
	if g.rows == 0 {
		fill3(d, v)
		return
	}
	fill3(d[:g.start], v)
	i := g.start + g.n
	for range g.rows - 1 {
		fill3(d[i:i+g.ow-g.n], v)
		i += g.ow
	}
	fill3(d[i:], v)
}

func fill1[T elem](d []T, v T) {
	for i := range d {
		d[i] = v
	}
}

func fill3[T elem](d [][3]T, v [3]T) {
	for i := range d {
		d[i] = v
	}
}

// planeFwd maps rows×n source bytes (row stride w) to output rows (stride
// ow). The row loop steps eight elements by reslicing: one length check per
// step and few live values, which Go's register allocator keeps in
// registers (an indexed form spilled them on every step).
func planeFwd[T elem](d []T, s []byte, l *[256]T, rows, n, ow, w int) {
	for r := range rows {
		dr, sr := d[r*ow:r*ow+n], s[r*w:r*w+n]
		for len(sr) >= 8 {
			dd := (*[8]T)(dr)
			dd[0], dd[1], dd[2], dd[3] = l[sr[0]], l[sr[1]], l[sr[2]], l[sr[3]]
			dd[4], dd[5], dd[6], dd[7] = l[sr[4]], l[sr[5]], l[sr[6]], l[sr[7]]
			dr, sr = dr[8:], sr[8:]
		}
		sr = sr[:len(dr)]
		for i, v := range sr {
			dr[i] = l[v]
		}
	}
}

// planeRev is planeFwd writing each row backwards (mirrored).
func planeRev[T elem](d []T, s []byte, l *[256]T, rows, n, ow, w int) {
	for r := range rows {
		dr, sr := d[r*ow:r*ow+n], s[r*w:r*w+n]
		for len(sr) >= 8 && len(dr) >= 8 {
			dd := (*[8]T)(dr[len(dr)-8:])
			dd[7], dd[6], dd[5], dd[4] = l[sr[0]], l[sr[1]], l[sr[2]], l[sr[3]]
			dd[3], dd[2], dd[1], dd[0] = l[sr[4]], l[sr[5]], l[sr[6]], l[sr[7]]
			dr, sr = dr[:len(dr)-8], sr[8:]
		}
		sr = sr[:len(dr)]
		for i := len(dr) - 1; i >= 0; i-- { // counting down keeps both indexes proven
			dr[i] = l[sr[len(dr)-1-i]]
		}
	}
}

// The three-channel loops below take four pixels per step through array
// views, so each step costs a handful of length checks and no per-element
// ones; the tail handles the last n%4 pixels.

// look maps one source pixel through the three channel tables.
func look[T elem](lut *[3][256]T, p *[3]byte) [3]T {
	return [3]T{lut[0][p[0]], lut[1][p[1]], lut[2][p[2]]}
}

// splitFwd maps interleaved source pixels (HWC) into three output planes.
func splitFwd[T elem](d0, d1, d2 []T, s [][3]byte, lut *[3][256]T, g *geom) {
	n, ow, w := g.n, g.ow, g.w
	for r := range g.rows {
		o := r * ow
		a, b, c := d0[o:o+n], d1[o:o+n], d2[o:o+n]
		sr := s[r*w : r*w+n]
		b, c, sr = b[:len(a)], c[:len(a)], sr[:len(a)]
		i := 0
		for ; i+4 <= len(a); i += 4 {
			pp := (*[4][3]byte)(sr[i : i+4])
			aa, bb, cc := (*[4]T)(a[i:i+4]), (*[4]T)(b[i:i+4]), (*[4]T)(c[i:i+4])
			aa[0], bb[0], cc[0] = lut[0][pp[0][0]], lut[1][pp[0][1]], lut[2][pp[0][2]]
			aa[1], bb[1], cc[1] = lut[0][pp[1][0]], lut[1][pp[1][1]], lut[2][pp[1][2]]
			aa[2], bb[2], cc[2] = lut[0][pp[2][0]], lut[1][pp[2][1]], lut[2][pp[2][2]]
			aa[3], bb[3], cc[3] = lut[0][pp[3][0]], lut[1][pp[3][1]], lut[2][pp[3][2]]
		}
		for ; i < len(sr); i++ {
			p := &sr[i]
			a[i], b[i], c[i] = lut[0][p[0]], lut[1][p[1]], lut[2][p[2]]
		}
	}
}

// splitRev is splitFwd mirrored: each output row is its source row read
// backwards. The writes go forwards, as splitFwd's do: into a batch
// buffer far larger than the caches, descending stores ran at a third of
// the speed of ascending ones in the ImageNet pipeline.
func splitRev[T elem](d0, d1, d2 []T, s [][3]byte, lut *[3][256]T, g *geom) {
	n, ow, w := g.n, g.ow, g.w
	for r := range g.rows {
		o := r * ow
		a, b, c := d0[o:o+n], d1[o:o+n], d2[o:o+n]
		sr := s[r*w : r*w+n]
		b, c, sr = b[:len(a)], c[:len(a)], sr[:len(a)]
		m, i := len(a), 0
		for ; i+4 <= m; i += 4 {
			pp := (*[4][3]byte)(sr[m-i-4 : m-i])
			aa, bb, cc := (*[4]T)(a[i:i+4]), (*[4]T)(b[i:i+4]), (*[4]T)(c[i:i+4])
			aa[0], bb[0], cc[0] = lut[0][pp[3][0]], lut[1][pp[3][1]], lut[2][pp[3][2]]
			aa[1], bb[1], cc[1] = lut[0][pp[2][0]], lut[1][pp[2][1]], lut[2][pp[2][2]]
			aa[2], bb[2], cc[2] = lut[0][pp[1][0]], lut[1][pp[1][1]], lut[2][pp[1][2]]
			aa[3], bb[3], cc[3] = lut[0][pp[0][0]], lut[1][pp[0][1]], lut[2][pp[0][2]]
		}
		for ; i < m; i++ {
			p := &sr[m-1-i]
			a[i], b[i], c[i] = lut[0][p[0]], lut[1][p[1]], lut[2][p[2]]
		}
	}
}

// mergeFwd maps three source planes (CHW) into interleaved output pixels.
func mergeFwd[T elem](d [][3]T, s0, s1, s2 []byte, lut *[3][256]T, g *geom) {
	n, ow, w := g.n, g.ow, g.w
	for r := range g.rows {
		dr := d[r*ow : r*ow+n]
		a, b, c := s0[r*w:r*w+n], s1[r*w:r*w+n], s2[r*w:r*w+n]
		a, b, c = a[:len(dr)], b[:len(dr)], c[:len(dr)]
		i := 0
		for ; i+4 <= len(dr); i += 4 {
			x, y, z := (*[4]byte)(a[i:i+4]), (*[4]byte)(b[i:i+4]), (*[4]byte)(c[i:i+4])
			dd := (*[4][3]T)(dr[i : i+4])
			dd[0] = [3]T{lut[0][x[0]], lut[1][y[0]], lut[2][z[0]]}
			dd[1] = [3]T{lut[0][x[1]], lut[1][y[1]], lut[2][z[1]]}
			dd[2] = [3]T{lut[0][x[2]], lut[1][y[2]], lut[2][z[2]]}
			dd[3] = [3]T{lut[0][x[3]], lut[1][y[3]], lut[2][z[3]]}
		}
		for ; i < len(dr); i++ {
			dr[i] = [3]T{lut[0][a[i]], lut[1][b[i]], lut[2][c[i]]}
		}
	}
}

// mergeRev is mergeFwd writing each row backwards (mirrored).
func mergeRev[T elem](d [][3]T, s0, s1, s2 []byte, lut *[3][256]T, g *geom) {
	n, ow, w := g.n, g.ow, g.w
	for r := range g.rows {
		dr := d[r*ow : r*ow+n]
		a, b, c := s0[r*w:r*w+n], s1[r*w:r*w+n], s2[r*w:r*w+n]
		a, b, c = a[:len(dr)], b[:len(dr)], c[:len(dr)]
		m, i := len(dr), 0
		for ; i+4 <= m; i += 4 {
			x, y, z := (*[4]byte)(a[i:i+4]), (*[4]byte)(b[i:i+4]), (*[4]byte)(c[i:i+4])
			dd := (*[4][3]T)(dr[m-i-4 : m-i])
			dd[3] = [3]T{lut[0][x[0]], lut[1][y[0]], lut[2][z[0]]}
			dd[2] = [3]T{lut[0][x[1]], lut[1][y[1]], lut[2][z[1]]}
			dd[1] = [3]T{lut[0][x[2]], lut[1][y[2]], lut[2][z[2]]}
			dd[0] = [3]T{lut[0][x[3]], lut[1][y[3]], lut[2][z[3]]}
		}
		for i := m - 1 - i; i >= 0; i-- {
			j := m - 1 - i
			dr[i] = [3]T{lut[0][a[j]], lut[1][b[j]], lut[2][c[j]]}
		}
	}
}

// pixFwd maps interleaved source pixels to interleaved output pixels.
func pixFwd[T elem](d [][3]T, s [][3]byte, lut *[3][256]T, g *geom) {
	n, ow, w := g.n, g.ow, g.w
	for r := range g.rows {
		dr, sr := d[r*ow:r*ow+n], s[r*w:r*w+n]
		sr = sr[:len(dr)]
		i := 0
		for ; i+4 <= len(dr); i += 4 {
			pp, dd := (*[4][3]byte)(sr[i:i+4]), (*[4][3]T)(dr[i:i+4])
			dd[0] = look(lut, &pp[0])
			dd[1] = look(lut, &pp[1])
			dd[2] = look(lut, &pp[2])
			dd[3] = look(lut, &pp[3])
		}
		for ; i < len(dr); i++ {
			dr[i] = look(lut, &sr[i])
		}
	}
}

// pixRev is pixFwd writing each row backwards (mirrored).
func pixRev[T elem](d [][3]T, s [][3]byte, lut *[3][256]T, g *geom) {
	n, ow, w := g.n, g.ow, g.w
	for r := range g.rows {
		dr, sr := d[r*ow:r*ow+n], s[r*w:r*w+n]
		sr = sr[:len(dr)]
		m, i := len(dr), 0
		for ; i+4 <= m; i += 4 {
			pp, dd := (*[4][3]byte)(sr[i:i+4]), (*[4][3]T)(dr[m-i-4:m-i])
			dd[3] = look(lut, &pp[0])
			dd[2] = look(lut, &pp[1])
			dd[1] = look(lut, &pp[2])
			dd[0] = look(lut, &pp[3])
		}
		for i := m - 1 - i; i >= 0; i-- {
			dr[i] = look(lut, &sr[m-1-i])
		}
	}
}
