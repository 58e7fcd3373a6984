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
		crR[i] = (91881*x + half) >> scale // FIX(1.40200)
		cbB[i] = (116130*x + half) >> scale // FIX(1.77200)
		crG[i] = -46802 * x                 // FIX(0.71414)
		cbG[i] = -22554*x + half            // FIX(0.34414)
	}
}

// toRGB upsamples the chroma planes as libjpeg does and converts every
// output row into dst.
func (d *Decoder) toRGB(dst []byte) {
	y := &d.comp[0]
	ys := y.bw * 8
	if d.nc == 1 {
		for r := range d.h {
			src := d.plane[r*ys : r*ys+d.w]
			out := dst[r*d.w*3 : (r+1)*d.w*3]
			for i, v := range src {
				o := (*[3]byte)(out[i*3:])
				o[0], o[1], o[2] = v, v, v
			}
		}
		return
	}
	cb, cr := &d.comp[1], &d.comp[2]
	cs := cb.bw * 8
	ww := cb.dw * d.hmax // upsampled width, at least w
	for i := range d.row {
		if cap(d.row[i]) < ww {
			d.row[i] = make([]byte, ww)
		}
		d.row[i] = d.row[i][:ww]
	}
	ucb, ucr := d.row[0], d.row[1]
	for r := range d.h {
		yrow := d.plane[r*ys : r*ys+d.w]
		out := dst[r*d.w*3 : (r+1)*d.w*3]
		switch {
		case d.hmax == 1: // 4:4:4
			convert(out, yrow, d.plane[cb.off+r*cs:], d.plane[cr.off+r*cs:])
		case d.vmax == 1: // 4:2:2
			h2v1(ucb, d.plane[cb.off+r*cs:cb.off+r*cs+cb.dw])
			h2v1(ucr, d.plane[cr.off+r*cs:cr.off+r*cs+cr.dw])
			convert(out, yrow, ucb, ucr)
		default: // 4:2:0
			// The nearer chroma row is r/2, the further one the row above
			// for even r and below for odd r, the edge rows standing in
			// for their missing neighbours (jdmainct.c's context rows).
			near := r >> 1
			far := near - 1 + 2*(r&1)
			far = min(max(far, 0), cb.dh-1)
			a, b := cb.off+near*cs, cb.off+far*cs
			h2v2(ucb, d.plane[a:a+cb.dw], d.plane[b:b+cb.dw])
			a, b = cr.off+near*cs, cr.off+far*cs
			h2v2(ucr, d.plane[a:a+cr.dw], d.plane[b:b+cr.dw])
			convert(out, yrow, ucb, ucr)
		}
	}
}

// convert is libjpeg's ycc_rgb_convert for one row.
func convert(out, y, cb, cr []byte) {
	cb, cr = cb[:len(y)], cr[:len(y)]
	out = out[:3*len(y)]
	for i, yv := range y {
		Y, b, r := int32(yv), cb[i], cr[i]
		o := (*[3]byte)(out[i*3:])
		o[0] = clamp(Y + crR[r])
		o[1] = clamp(Y + (cbG[b]+crG[r])>>16)
		o[2] = clamp(Y + cbB[b])
	}
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

// h2v2 is libjpeg's h2v2_fancy_upsample for one output row: near is the
// nearer input row, far the further one; the triangle filter weighs them
// 3:1 vertically, then neighbouring columns 3:1.
func h2v2(out, near, far []byte) {
	n := len(near)
	out, far = out[:2*n], far[:n]
	this := int(near[0])*3 + int(far[0])
	next := int(near[1])*3 + int(far[1])
	out[0] = byte((this*4 + 8) >> 4)
	out[1] = byte((this*3 + next + 7) >> 4)
	last := this
	this = next
	for i := 1; i < n-1; i++ {
		next = int(near[i+1])*3 + int(far[i+1])
		out[2*i] = byte((this*3 + last + 8) >> 4)
		out[2*i+1] = byte((this*3 + next + 7) >> 4)
		last, this = this, next
	}
	out[2*n-2] = byte((this*3 + last + 8) >> 4)
	out[2*n-1] = byte((this*4 + 7) >> 4)
}
