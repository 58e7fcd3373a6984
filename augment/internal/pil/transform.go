package pil

import "math"

// transformAffine is Pillow's ImagingTransformAffine with NEAREST into an
// image prefilled with fill: a maps the centre of output pixel (x, y) to
// input coordinates (a0*x + a1*y + a2, a3*x + a4*y + a5). Pillow picks one
// of three engines, which round differently, so all three are kept: pure
// scaling and translation in float64 accumulated per step, 16.16 fixed
// point when every corner maps inside ±32768, and float64 otherwise.
func transformAffine(dst, src Image, a *[6]float64, fill []uint8) {
	fillImage(dst, fill)
	w, h := float64(src.W), float64(src.H)
	switch {
	case a[1] == 0 && a[3] == 0:
		scaleAffine(dst, src, a)
	case fixedOK(a, 0, 0) && fixedOK(a, w, h) && fixedOK(a, 0, h) && fixedOK(a, w, 0):
		fixedAffine(dst, src, a)
	default:
		floatAffine(dst, src, a)
	}
}

// fillImage sets every pixel of dst to fill (see Affine).
func fillImage(dst Image, fill []uint8) {
	var px [3]byte
	switch len(fill) {
	case 0:
	case 1:
		px = [3]byte{fill[0], fill[0], fill[0]}
	default:
		if len(fill) != dst.C {
			panic("pil: fill must have 1 or C values")
		}
		copy(px[:], fill)
	}
	d := dst.Pix[:dst.n()]
	if dst.C == 1 {
		for i := range d {
			d[i] = px[0]
		}
		return
	}
	for i := 0; i+2 < len(d); i += 3 {
		d[i], d[i+1], d[i+2] = px[0], px[1], px[2]
	}
}

// coord is Pillow's COORD: -1 for negative values, else truncation.
// Values too large for an int are clamped, where C would be undefined.
func coord(v float64) int {
	if v < 0 {
		return -1
	}
	if v >= 1<<30 {
		return 1 << 30
	}
	return int(v)
}

func fixedOK(a *[6]float64, x, y float64) bool {
	return math.Abs(float64(float64(x*a[0])+float64(y*a[1]))+a[2]) < 32768 &&
		math.Abs(float64(float64(x*a[3])+float64(y*a[4]))+a[5]) < 32768
}

// px copies pixel (x, y) of src to output pixel o.
func px(d, s []byte, c, o, i int) {
	if c == 1 {
		d[o] = s[i]
		return
	}
	d[o*3], d[o*3+1], d[o*3+2] = s[i*3], s[i*3+1], s[i*3+2]
}

// scaleAffine is ImagingScaleAffine. Its column table is replayed for
// every row rather than stored, to need no memory; the repeated float
// additions give the same values each time.
func scaleAffine(dst, src Image, a *[6]float64) {
	c, w := src.C, src.W
	s, d := src.Pix[:src.n()], dst.Pix[:dst.n()]
	x0 := a[2] + float64(a[0]*0.5)
	yo := a[5] + float64(a[4]*0.5)
	xmin, xmax := w, 0
	xo := x0
	for x := range w {
		if xin := coord(xo); xin >= 0 && xin < w {
			xmax = x + 1
			xmin = min(xmin, x)
		}
		xo += a[0]
	}
	for y := range dst.H {
		yi := coord(yo)
		yo += a[4]
		if yi < 0 || yi >= src.H {
			continue
		}
		xo := x0
		for x := range xmax {
			xin := coord(xo)
			xo += a[0]
			if x < xmin {
				continue
			}
			if xin < 0 || xin >= w {
				xin = 0 // Pillow's table holds 0 there
			}
			px(d, s, c, y*w+x, yi*w+xin)
		}
	}
}

// fix is Pillow's FIX: 16.16 fixed point, rounded half up.
func fix(v float64) int32 {
	v = float64(v*65536.0) + 0.5
	if v < 0 {
		return int32(math.Floor(v))
	}
	return int32(v)
}

// fixedAffine is Pillow's affine_fixed.
func fixedAffine(dst, src Image, a *[6]float64) {
	c, w, h := src.C, int32(src.W), int32(src.H)
	s, d := src.Pix[:src.n()], dst.Pix[:dst.n()]
	a0, a1, a3, a4 := fix(a[0]), fix(a[1]), fix(a[3]), fix(a[4])
	a2 := fix(a[2] + float64(a[0]*0.5) + float64(a[1]*0.5))
	a5 := fix(a[5] + float64(a[3]*0.5) + float64(a[4]*0.5))
	o := 0
	for range dst.H {
		xx, yy := a2, a5
		for range dst.W {
			if xin := xx >> 16; xin >= 0 && xin < w {
				if yin := yy >> 16; yin >= 0 && yin < h {
					px(d, s, c, o, int(yin*w+xin))
				}
			}
			xx += a0
			yy += a3
			o++
		}
		a2 += a1
		a5 += a4
	}
}

// floatAffine is the float64 engine of ImagingTransformAffine.
func floatAffine(dst, src Image, a *[6]float64) {
	c, w, h := src.C, src.W, src.H
	s, d := src.Pix[:src.n()], dst.Pix[:dst.n()]
	xo := a[2] + float64(a[1]*0.5) + float64(a[0]*0.5)
	yo := a[5] + float64(a[4]*0.5) + float64(a[3]*0.5)
	o := 0
	for range dst.H {
		xx, yy := xo, yo
		for range dst.W {
			if xin := coord(xx); xin >= 0 && xin < w {
				if yin := coord(yy); yin >= 0 && yin < h {
					px(d, s, c, o, yin*w+xin)
				}
			}
			xx += a[0]
			yy += a[3]
			o++
		}
		xo += a[1]
		yo += a[4]
	}
}
