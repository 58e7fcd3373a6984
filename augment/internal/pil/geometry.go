package pil

import "math"

// Python's math.radians and math.degrees multiply by constants that C
// computes in double from M_PI; Go would fold math.Pi/180 exactly, which
// may round differently, so these are computed at run time.
var (
	pi       = math.Pi
	degToRad = pi / 180
	radToDeg = 180 / pi
)

// Affine performs F.affine on a PIL image with NEAREST: torchvision's
// inverse matrix (_get_inverse_affine_matrix, angle and shear in degrees)
// about center, or the image centre (W/2, H/2) when center is nil, then
// Pillow's AFFINE transform with fillcolor fill. fill is nil (0), one
// value for every channel, or C values.
func Affine(dst, src Image, angle float64, translate [2]float64, scale float64, shear [2]float64, center *[2]float64, fill []uint8) {
	check(dst, src, 0)
	if !(scale > 0) {
		panic("pil: affine scale must be positive")
	}
	c := [2]float64{float64(src.W) * 0.5, float64(src.H) * 0.5}
	if center != nil {
		c = *center
	}
	rot := angle * degToRad
	sx := shear[0] * degToRad
	sy := shear[1] * degToRad
	cx, cy := c[0], c[1]
	tx, ty := translate[0], translate[1]

	// The conversions keep every product a separate rounding, as in
	// CPython.
	a := math.Cos(rot-sy) / math.Cos(sy)
	b := float64(float64(-math.Cos(rot-sy)*math.Tan(sx))/math.Cos(sy)) - math.Sin(rot)
	cc := math.Sin(rot-sy) / math.Cos(sy)
	d := float64(float64(-math.Sin(rot-sy)*math.Tan(sx))/math.Cos(sy)) + math.Cos(rot)

	m := [6]float64{d / scale, -b / scale, 0, -cc / scale, a / scale, 0}
	m[2] += float64(m[0]*(-cx-tx)) + float64(m[1]*(-cy-ty))
	m[5] += float64(m[3]*(-cx-tx)) + float64(m[4]*(-cy-ty))
	m[2] += cx
	m[5] += cy
	transformAffine(dst, src, &m, fill)
}

// Rotate performs F.rotate on a PIL image with NEAREST, expand=False, about
// the centre: Image.rotate, whose angles of 0 and 180 degrees (and 90 and
// 270 on square images) are exact transpositions and whose other matrices
// are rounded to 15 decimals before the AFFINE transform.
func Rotate(dst, src Image, angle float64, fill []uint8) {
	check(dst, src, 0)
	angle = pyMod(angle, 360)
	switch {
	case angle == 0:
		copy(dst.Pix, src.Pix[:src.n()])
		return
	case angle == 180:
		rotate180(dst, src)
		return
	case (angle == 90 || angle == 270) && src.W == src.H:
		rotate90(dst, src, angle == 90)
		return
	}
	cx, cy := float64(src.W)/2, float64(src.H)/2
	t := -(angle * degToRad)
	m := [6]float64{round15(math.Cos(t)), round15(math.Sin(t)), 0, round15(-math.Sin(t)), round15(math.Cos(t)), 0}
	x, y := -cx, -cy
	m2 := float64(float64(m[0]*x)+float64(m[1]*y)) + m[2]
	m5 := float64(float64(m[3]*x)+float64(m[4]*y)) + m[5]
	m[2], m[5] = m2+cx, m5+cy
	transformAffine(dst, src, &m, fill)
}

// pyMod is Python's float %: the result has the divisor's sign.
func pyMod(x, y float64) float64 {
	r := math.Mod(x, y)
	if r != 0 {
		if (y < 0) != (r < 0) {
			r += y
		}
	} else {
		r = math.Copysign(0, y)
	}
	return r
}

// round15 is Python's round(x, 15) for |x| <= 1: correctly rounded to 15
// decimals, ties to even. x*1e15 is below 2^50, so the product's exact
// value is p+e with e recovered by a fused multiply-add; only when p
// lands exactly on a half does e decide the direction.
func round15(x float64) float64 {
	p := float64(x * 1e15) // rounded: no FMA may take the product into the sums below (arm64)
	e := math.FMA(x, 1e15, -p)
	r := math.Round(p)
	if math.Abs(p-math.Trunc(p)) == 0.5 {
		switch {
		case e > 0:
			r = math.Floor(p) + 1
		case e < 0:
			r = math.Floor(p)
		default:
			r = math.RoundToEven(p)
		}
	}
	return r / 1e15
}

// rotate180 is Pillow's ROTATE_180 transposition.
func rotate180(dst, src Image) {
	c := src.C
	s, d := src.Pix[:src.n()], dst.Pix[:src.n()]
	n := src.H * src.W
	for i := range n {
		j := n - 1 - i
		copy(d[j*c:j*c+c], s[i*c:i*c+c])
	}
}

// rotate90 is Pillow's ROTATE_90 (counterclockwise) or ROTATE_270 on a
// square image.
func rotate90(dst, src Image, ccw bool) {
	c, w := src.C, src.W
	s, d := src.Pix[:src.n()], dst.Pix[:src.n()]
	for y := range src.H {
		for x := range w {
			var o int
			if ccw {
				o = (w-1-x)*w + y
			} else {
				o = x*w + (src.H - 1 - y)
			}
			i := y*w + x
			copy(d[o*c:o*c+c], s[i*c:i*c+c])
		}
	}
}
