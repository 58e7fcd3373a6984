package pil

// check panics unless src is a valid image and dst has its shape, with
// channels dstC (0 means src.C).
func check(dst, src Image, dstC int) {
	if src.C != 1 && src.C != 3 {
		panic("pil: image must have 1 or 3 channels")
	}
	if dstC == 0 {
		dstC = src.C
	}
	if src.H < 0 || src.W < 0 || len(src.Pix) < src.H*src.W*src.C {
		panic("pil: source pixels shorter than H*W*C")
	}
	if dst.H != src.H || dst.W != src.W || dst.C != dstC {
		panic("pil: destination shape differs from source")
	}
	if len(dst.Pix) < dst.H*dst.W*dst.C {
		panic("pil: destination pixels shorter than H*W*C")
	}
}

// n returns the number of bytes of the image.
func (m Image) n() int { return m.H * m.W * m.C }

// applyLUT maps every byte of src through lut (one table for all channels,
// as ImageOps does) into dst.
func applyLUT(dst, src []byte, lut *[256]byte) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = lut[v]
	}
}

// applyLUT3 maps channel k of every pixel through luts[k].
func applyLUT3(dst, src []byte, luts *[3][256]byte) {
	dst = dst[:len(src)]
	for i := 0; i+2 < len(src); i += 3 {
		dst[i] = luts[0][src[i]]
		dst[i+1] = luts[1][src[i+1]]
		dst[i+2] = luts[2][src[i+2]]
	}
}
