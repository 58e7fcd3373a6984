package pil

import (
	"math"
	"unsafe"
)

// transformAffine is Pillow's ImagingTransformAffine with NEAREST into an
// image prefilled with fill: a maps the centre of output pixel (x, y) to
// input coordinates (a0*x + a1*y + a2, a3*x + a4*y + a5). Pillow picks one
// of three engines, which round differently, so all three are kept: pure
// scaling and translation in float64 accumulated per step, 16.16 fixed
// point when every corner maps inside ±32768, and float64 otherwise.
// Each engine writes every output pixel once, the source's or the fill,
// instead of filling the image first: one pass over dst, not two.
func transformAffine(dst, src Image, a *[6]float64, fill []uint8) {
	f := fillPixel(fill, dst.C)
	if src.C == 1 {
		affine(asPixels[[1]byte](dst), asPixels[[1]byte](src), src, a, [1]byte{f[0]})
	} else {
		affine(asPixels[[3]byte](dst), asPixels[[3]byte](src), src, a, f)
	}
}

// pixel is one pixel of an L or RGB image, so the engines move whole
// pixels with one typed store.
type pixel interface{ [1]byte | [3]byte }

// asPixels views im's H·W pixels (check has bounded Pix).
func asPixels[P pixel](im Image) []P {
	n := im.H * im.W
	if n == 0 {
		return nil
	}
	var p P
	_ = im.Pix[n*len(p)-1]
	return unsafe.Slice((*P)(unsafe.Pointer(unsafe.SliceData(im.Pix))), n)
}

func affine[P pixel](d, s []P, src Image, a *[6]float64, f P) {
	w, h := float64(src.W), float64(src.H)
	switch {
	case a[1] == 0 && a[3] == 0:
		scaleAffine(d, s, src.W, src.H, a, f)
	case fixedOK(a, 0, 0) && fixedOK(a, w, h) && fixedOK(a, 0, h) && fixedOK(a, w, 0):
		fixedAffine(d, s, src.W, src.H, a, f)
	default:
		floatAffine(d, s, src.W, src.H, a, f)
	}
}

// fillPixel is the pixel Affine's fill gives (zero for none).
func fillPixel(fill []uint8, c int) [3]byte {
	switch len(fill) {
	case 0:
		return [3]byte{}
	case 1:
		return [3]byte{fill[0], fill[0], fill[0]}
	}
	if len(fill) != c {
		panic("pil: fill must have 1 or C values")
	}
	var px [3]byte
	copy(px[:], fill)
	return px
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

// scaleAffine is ImagingScaleAffine. Its column table is replayed for
// every row rather than stored, to need no memory; the repeated float
// additions give the same values each time.
func scaleAffine[P pixel](d, s []P, w, h int, a *[6]float64, f P) {
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
	for y := range h {
		row := d[y*w : (y+1)*w]
		yi := coord(yo)
		yo += a[4]
		if yi < 0 || yi >= h {
			fillRow(row, f)
			continue
		}
		sr := s[yi*w : (yi+1)*w]
		xo := x0
		for x := range row {
			xin := coord(xo)
			xo += a[0]
			if x < xmin || x >= xmax {
				row[x] = f
				continue
			}
			if xin < 0 || xin >= w {
				xin = 0 // Pillow's table holds 0 there
			}
			row[x] = sr[xin]
		}
	}
}

func fillRow[P pixel](row []P, f P) {
	for i := range row {
		row[i] = f
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
func fixedAffine[P pixel](d, s []P, w, h int, a *[6]float64, f P) {
	a0, a1, a3, a4 := fix(a[0]), fix(a[1]), fix(a[3]), fix(a[4])
	a2 := fix(a[2] + float64(a[0]*0.5) + float64(a[1]*0.5))
	a5 := fix(a[5] + float64(a[3]*0.5) + float64(a[4]*0.5))
	uw, uh := uint32(w), uint32(h)
	for y := range h {
		row := d[y*w : (y+1)*w]
		xx, yy := a2, a5
		for x := range row {
			if xin, yin := uint32(xx>>16), uint32(yy>>16); xin < uw && yin < uh {
				row[x] = s[int(yin)*w+int(xin)]
			} else {
				row[x] = f
			}
			xx += a0
			yy += a3
		}
		a2 += a1
		a5 += a4
	}
}

// floatAffine is the float64 engine of ImagingTransformAffine.
func floatAffine[P pixel](d, s []P, w, h int, a *[6]float64, f P) {
	xo := a[2] + float64(a[1]*0.5) + float64(a[0]*0.5)
	yo := a[5] + float64(a[4]*0.5) + float64(a[3]*0.5)
	for y := range h {
		row := d[y*w : (y+1)*w]
		xx, yy := xo, yo
		for x := range row {
			if xin, yin := coord(xx), coord(yy); xin >= 0 && xin < w && yin >= 0 && yin < h {
				row[x] = s[yin*w+xin]
			} else {
				row[x] = f
			}
			xx += a[0]
			yy += a[3]
		}
		xo += a[1]
		yo += a[4]
	}
}
