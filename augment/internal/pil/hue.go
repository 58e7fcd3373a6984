package pil

import "math"

// Hue performs F.adjust_hue: the image is converted to Pillow's HSV, the
// hue byte is shifted by uint8(factor*255) with wraparound (numpy's cast
// truncates toward zero and wraps negatives), and the result is converted
// back. factor must be in [-0.5, 0.5]. An L image is copied.
func Hue(dst, src Image, factor float64) {
	check(dst, src, 0)
	if !(factor >= -0.5 && factor <= 0.5) {
		panic("pil: hue factor outside [-0.5, 0.5]")
	}
	s, d := src.Pix[:src.n()], dst.Pix[:src.n()]
	if src.C == 1 {
		copy(d, s)
		return
	}
	shift := byte(int(factor * 255))
	for i := 0; i+2 < len(s); i += 3 {
		h, sat, v := rgbToHSV(s[i], s[i+1], s[i+2])
		d[i], d[i+1], d[i+2] = hsvToRGB(h+shift, sat, v)
	}
}

// rgbToHSV is Pillow's rgb2hsv. Its C mixes float variables with double
// constants, so some steps round to float32 and others run in float64;
// the conversions below mark each float32 rounding.
func rgbToHSV(r, g, b byte) (h, s, v byte) {
	maxc := max(r, g, b)
	minc := min(r, g, b)
	if maxc == minc {
		return 0, 0, maxc
	}
	cr := float32(maxc - minc)
	sf := cr / float32(maxc)
	rc := float32(maxc-r) / cr
	gc := float32(maxc-g) / cr
	bc := float32(maxc-b) / cr
	var hf float32
	switch maxc {
	case r:
		hf = bc - gc
	case g:
		hf = float32(2.0 + float64(rc) - float64(bc))
	default:
		hf = float32(4.0 + float64(gc) - float64(rc))
	}
	// fmod(x, 1) for x = h/6+1 in (0, 2): subtracting 1 from x in [1, 2)
	// is exact, as fmod is.
	x := float64(hf)/6.0 + 1.0
	if x >= 1 {
		x--
	}
	hf = float32(x)
	return clipInt(int(float64(hf) * 255.0)), clipInt(int(float64(sf) * 255.0)), maxc
}

// hsv2rgb's per-hue sector and fraction and per-saturation fraction,
// tabulated: they depend on one byte each.
var (
	hueSector [256]uint8
	hueFrac   [256]float32
	satFrac   [256]float32
)

func init() {
	for v := range 256 {
		hh := float64(float32(v)) * 6.0 / 255.0
		i := int(math.Floor(hh))
		hueSector[v] = uint8(i % 6)
		hueFrac[v] = float32(hh - float64(float32(i)))
		satFrac[v] = float32(float64(float32(v)) / 255.0)
	}
}

// hsvToRGB is Pillow's hsv2rgb, with the same float/double mix.
func hsvToRGB(h, s, v byte) (r, g, b byte) {
	if s == 0 {
		return v, v, v
	}
	f, fs := hueFrac[h], satFrac[s]
	fv := float64(float32(v))
	p := clipInt(int(math.Round(fv * (1.0 - float64(fs)))))
	q := clipInt(int(math.Round(fv * (1.0 - float64(float32(fs*f))))))
	t := clipInt(int(math.Round(fv * (1.0 - float64(float64(fs)*(1.0-float64(f)))))))
	switch hueSector[h] {
	case 0:
		return v, t, p
	case 1:
		return q, v, p
	case 2:
		return p, v, t
	case 3:
		return p, q, v
	case 4:
		return t, p, v
	default:
		return v, p, q
	}
}

func clipInt(v int) byte {
	return byte(min(max(v, 0), 255))
}
