package pil

import (
	"math"

	"github.com/loaderd/loaderd/client/sample"
)

// ApplyOp performs torchvision's autoaugment._apply_op(img, op, magnitude,
// NEAREST, fill) on a PIL image; magnitude is the signed value _apply_op
// receives. The shears use the angle atan(magnitude) about the origin
// (not the centre), translations truncate the magnitude to whole pixels,
// the enhancements use the factor 1+magnitude, and Posterize keeps
// int(magnitude) bits.
func ApplyOp(dst, src Image, op Op, magnitude float64, fill []uint8) {
	var origin = [2]float64{0, 0}
	switch op {
	case sample.OpIdentity:
		check(dst, src, 0)
		copy(dst.Pix, src.Pix[:src.n()])
	case sample.OpShearX:
		Affine(dst, src, 0, [2]float64{}, 1, [2]float64{math.Atan(magnitude) * radToDeg, 0}, &origin, fill)
	case sample.OpShearY:
		Affine(dst, src, 0, [2]float64{}, 1, [2]float64{0, math.Atan(magnitude) * radToDeg}, &origin, fill)
	case sample.OpTranslateX:
		Affine(dst, src, 0, [2]float64{math.Trunc(magnitude), 0}, 1, [2]float64{}, nil, fill)
	case sample.OpTranslateY:
		Affine(dst, src, 0, [2]float64{0, math.Trunc(magnitude)}, 1, [2]float64{}, nil, fill)
	case sample.OpRotate:
		Rotate(dst, src, magnitude, fill)
	case sample.OpBrightness:
		Brightness(dst, src, 1+magnitude)
	case sample.OpColor:
		Saturation(dst, src, 1+magnitude)
	case sample.OpContrast:
		Contrast(dst, src, 1+magnitude)
	case sample.OpSharpness:
		Sharpness(dst, src, 1+magnitude)
	case sample.OpPosterize:
		Posterize(dst, src, int(magnitude))
	case sample.OpSolarize:
		Solarize(dst, src, magnitude)
	case sample.OpAutoContrast:
		AutoContrast(dst, src)
	case sample.OpEqualize:
		Equalize(dst, src)
	case sample.OpInvert:
		Invert(dst, src)
	default:
		panic("pil: unknown op " + op.String())
	}
}
