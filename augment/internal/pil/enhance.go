package pil

// ImageEnhance builds a "degenerate" image and calls Image.blend(degenerate,
// image, factor). Pillow's ImagingBlend takes alpha as a C float and
// computes deg + alpha*(img-deg) in float32, truncating toward zero when
// 0 <= alpha <= 1 and clipping to [0, 255] before truncating otherwise;
// alpha 0 and 1 copy one of the images, which the formula also gives.

// blender blends bytes with a fixed alpha. The float32 products
// alpha*(img-deg) are tabulated by difference: a table entry is the same
// rounded product the C computes.
type blender struct {
	prod   [511]float32 // prod[d+255] = alpha*d
	interp bool         // 0 <= alpha <= 1: no clipping
}

func (b *blender) init(alpha float32) {
	for i := range b.prod {
		b.prod[i] = alpha * float32(i-255)
	}
	b.interp = alpha >= 0 && alpha <= 1
}

// at blends one byte the way ImagingBlend does.
func (b *blender) at(deg, img byte) byte {
	t := float32(deg) + b.prod[int(img)-int(deg)+255]
	if b.interp {
		return byte(t)
	}
	if t <= 0 {
		return 0
	}
	if t >= 255 {
		return 255
	}
	return byte(t)
}

// blendLUT fills lut[v] with the blend of the constant deg and v.
func blendLUT(lut *[256]byte, deg byte, alpha float32) {
	var b blender
	b.init(alpha)
	for v := range lut {
		lut[v] = b.at(deg, byte(v))
	}
}

// Brightness performs F.adjust_brightness: a blend with black.
func Brightness(dst, src Image, factor float64) {
	check(dst, src, 0)
	var lut [256]byte
	blendLUT(&lut, 0, float32(factor))
	applyLUT(dst.Pix, src.Pix[:src.n()], &lut)
}

// Contrast performs F.adjust_contrast: a blend with the mean luma of the
// image, rounded to an integer, as ImageStat computes it from the L
// histogram.
func Contrast(dst, src Image, factor float64) {
	check(dst, src, 0)
	var hist [256]int
	lumaHistogram(&hist, src)
	// ImageStat sums j*h[j] into a Python float; every partial sum is an
	// integer below 2^53, so an integer sum converted once is the same.
	sum, count := 0, 0
	for j, c := range hist {
		sum += j * c
		count += c
	}
	if count == 0 {
		return
	}
	mean := int(float64(sum)/float64(count) + 0.5)
	var lut [256]byte
	blendLUT(&lut, byte(mean), float32(factor))
	applyLUT(dst.Pix, src.Pix[:src.n()], &lut)
}

// lumaHistogram counts the L values of src (its bytes when C is 1).
func lumaHistogram(hist *[256]int, src Image) {
	p := src.Pix[:src.n()]
	if src.C == 1 {
		for _, v := range p {
			hist[v]++
		}
		return
	}
	for i := 0; i+2 < len(p); i += 3 {
		hist[luma(p[i], p[i+1], p[i+2])]++
	}
}

// luma is Pillow's RGB to L conversion: ITU-R 601-2 weights in 16-bit
// fixed point, rounded.
func luma(r, g, b byte) byte {
	return byte((uint32(r)*19595 + uint32(g)*38470 + uint32(b)*7471 + 0x8000) >> 16)
}

// Saturation performs F.adjust_saturation (ImageEnhance.Color): a blend
// with the image's own luma. An L image is its own luma, so it is copied.
func Saturation(dst, src Image, factor float64) {
	check(dst, src, 0)
	if src.C == 1 {
		copy(dst.Pix, src.Pix[:src.n()])
		return
	}
	var b blender
	b.init(float32(factor))
	s, d := src.Pix[:src.n()], dst.Pix[:src.n()]
	for i := 0; i+2 < len(s); i += 3 {
		l := luma(s[i], s[i+1], s[i+2])
		d[i] = b.at(l, s[i])
		d[i+1] = b.at(l, s[i+1])
		d[i+2] = b.at(l, s[i+2])
	}
}

// Grayscale performs F.rgb_to_grayscale with num_output_channels dst.C
// (1 or 3): Pillow's L conversion, replicated into three channels if
// asked. An L source is copied.
func Grayscale(dst, src Image) {
	if dst.C != 1 && dst.C != 3 {
		panic("pil: grayscale output must have 1 or 3 channels")
	}
	check(dst, src, dst.C)
	s := src.Pix[:src.n()]
	d := dst.Pix[:dst.n()]
	switch {
	case src.C == 1 && dst.C == 1:
		copy(d, s)
	case src.C == 1:
		for i, v := range s {
			d[3*i], d[3*i+1], d[3*i+2] = v, v, v
		}
	case dst.C == 1:
		for i := range d {
			d[i] = luma(s[3*i], s[3*i+1], s[3*i+2])
		}
	default:
		for i := 0; i+2 < len(s); i += 3 {
			l := luma(s[i], s[i+1], s[i+2])
			d[i], d[i+1], d[i+2] = l, l, l
		}
	}
}
