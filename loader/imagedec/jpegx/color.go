package jpegx

// libjpeg's YCbCr→RGB tables (jdcolor.c build_ycc_rgb_table): 16-bit
// fixed point, rounding added once in cbG.
var crR, cbB, crG, cbG [256]int32

func init() {
	const (
		scale = 16
		half  = 1 << (scale - 1)
	)
	for i := range 256 {
		x := int32(i - 128)
		crR[i] = (91881*x + half) >> scale  // FIX(1.40200)
		cbB[i] = (116130*x + half) >> scale // FIX(1.77200)
		crG[i] = -46802 * x                 // FIX(0.71414)
		cbG[i] = -22554*x + half            // FIX(0.34414)
	}
}

// rl is libjpeg's range limit: rl[(v+rlOff)&rlMask] is v clamped to
// 0..255 for every v a conversion can produce (-227..482).
var rl [1024]byte

const rlOff, rlMask = 256, 1023

func init() {
	for i := range rl {
		rl[i] = clamp(int32(i - rlOff))
	}
}

// toRGB upsamples the chroma planes as libjpeg does and converts the
// window's rows and columns (the whole image for DecodeRGB) into dst, rows
// of the window's width.
func (d *Decoder) toRGB(dst []byte) {
	x0, y0, x1, y1 := d.win.x0, d.win.y0, d.win.x1, d.win.y1
	ow := (x1 - x0) * 3
	y := &d.comp[0]
	ys := y.stride
	if d.nc == 1 {
		for r := y0; r < y1; r++ {
			src := d.plane[y.off+r*ys+x0 : y.off+r*ys+x1]
			out := dst[(r-y0)*ow : (r-y0+1)*ow]
			for i, v := range src {
				o := (*[3]byte)(out[i*3:])
				o[0], o[1], o[2] = v, v, v
			}
		}
		return
	}
	cb, cr := &d.comp[1], &d.comp[2]
	cs := cb.stride
	ww := cb.dw * d.hmax // upsampled width, at least w
	for i := range d.row {
		if cap(d.row[i]) < ww {
			d.row[i] = make([]byte, ww)
		}
		d.row[i] = d.row[i][:ww]
	}
	ucb, ucr := d.row[0], d.row[1]
	if d.hmax == 2 && d.vmax == 2 {
		// Each chroma row's margins repeat its edge samples: then the
		// upsampler's special first and last columns are its general
		// formula (see up420), and inside the row a window's columns
		// find their true neighbours beside them.
		for _, c := range []*component{cb, cr} {
			for r := range c.dh {
				row := d.plane[c.off+r*cs-1 : c.off+r*cs+c.dw+1]
				row[0], row[c.dw+1] = row[1], row[c.dw]
			}
		}
	}
	// The chroma columns of a 4:2:0 window: c0..c1-1 cover x0..x1-1.
	c0, c1 := x0/2, (x1+1)/2
	for r := y0; r < y1; r++ {
		yrow := d.plane[y.off+r*ys+x0 : y.off+r*ys+x1]
		out := dst[(r-y0)*ow : (r-y0+1)*ow]
		switch {
		case d.hmax == 1: // 4:4:4
			convert(out, yrow, d.plane[cb.off+r*cs+x0:], d.plane[cr.off+r*cs+x0:])
		case d.vmax == 1: // 4:2:2: the whole row (h2v1 treats its ends as edges)
			h2v1(ucb, d.plane[cb.off+r*cs:cb.off+r*cs+cb.dw])
			h2v1(ucr, d.plane[cr.off+r*cs:cr.off+r*cs+cr.dw])
			convert(out, yrow, ucb[x0:], ucr[x0:])
		default: // 4:2:0
			// The nearer chroma row is r/2, the further one the row above
			// for even r and below for odd r, the edge rows standing in
			// for their missing neighbours (jdmainct.c's context rows).
			near := r >> 1
			far := near - 1 + 2*(r&1)
			far = min(max(far, 0), cb.dh-1)
			n, f := near*cs-1+c0, far*cs-1+c0 // from the column left of c0
			m := c1 - c0 + 2
			up420(ucb, d.plane[cb.off+n:cb.off+n+m], d.plane[cb.off+f:cb.off+f+m])
			up420(ucr, d.plane[cr.off+n:cr.off+n+m], d.plane[cr.off+f:cr.off+f+m])
			convert(out, yrow, ucb[x0-2*c0:], ucr[x0-2*c0:])
		}
	}
}

// up420 is libjpeg's h2v2_fancy_upsample for one output row, from rows
// with their margins (each edge sample repeated beyond it): near the
// nearer input row, far the further one. The
// triangle filter weighs them 3:1 vertically, then neighbouring columns
// 3:1; with the padding the edge columns' special cases,
// (4·this + 8) >> 4 and (4·this + 7) >> 4, are the general formula.
func up420(out, near, far []byte) {
	n := len(near) - 2
	far = far[:n+2]
	out = out[:2*n]
	for i := h2v2SIMD(out, near, far); i < n; i++ {
		last := int(near[i])*3 + int(far[i])
		this := int(near[i+1])*3 + int(far[i+1])
		next := int(near[i+2])*3 + int(far[i+2])
		out[2*i] = byte((this*3 + last + 8) >> 4)
		out[2*i+1] = byte((this*3 + next + 7) >> 4)
	}
}

// convert is libjpeg's ycc_rgb_convert for one row.
func convert(out, y, cb, cr []byte) {
	cb, cr = cb[:len(y)], cr[:len(y)]
	out = out[:3*len(y)]
	for i := convertSIMD(out, y, cb, cr); i < len(y); i++ {
		pixel((*[3]byte)(out[i*3:]), int32(y[i]), cb[i], cr[i])
	}
}

// pixel converts one YCbCr sample to RGB (ycc_rgb_convert's inner loop).
func pixel(o *[3]byte, y int32, cb, cr byte) {
	o[0] = rl[(y+crR[cr]+rlOff)&rlMask]
	o[1] = rl[(y+(cbG[cb]+crG[cr])>>16+rlOff)&rlMask]
	o[2] = rl[(y+cbB[cb]+rlOff)&rlMask]
}

// h2v1 is libjpeg's h2v1_fancy_upsample: each output sample is 3/4 of the
// nearer input sample and 1/4 of the further one, with alternating
// rounding. in has at least 3 samples.
func h2v1(out, in []byte) {
	n := len(in)
	out = out[:2*n]
	out[0] = in[0]
	out[1] = byte((int(in[0])*3 + int(in[1]) + 2) >> 2)
	for i := 1; i < n-1; i++ {
		v := int(in[i]) * 3
		out[2*i] = byte((v + int(in[i-1]) + 1) >> 2)
		out[2*i+1] = byte((v + int(in[i+1]) + 2) >> 2)
	}
	out[2*n-2] = byte((int(in[n-1])*3 + int(in[n-2]) + 1) >> 2)
	out[2*n-1] = in[n-1]
}
