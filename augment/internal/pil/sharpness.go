package pil

// Sharpness performs F.adjust_sharpness (ImageEnhance.Sharpness): a blend
// with the image smoothed by Pillow's SMOOTH filter, the 3x3 kernel
// (1 1 1 / 1 5 1 / 1 1 1)/13. Pillow filters in float32 with the kernel
// divided by 13, a 0.5 rounding offset, rows summed bottom row first, and
// truncation; it keeps the outermost pixels, and copies images smaller
// than the kernel whole, so those pixels blend with themselves.
func Sharpness(dst, src Image, factor float64) {
	check(dst, src, 0)
	h, w, c := src.H, src.W, src.C
	s, d := src.Pix[:src.n()], dst.Pix[:src.n()]
	if h < 3 || w < 3 {
		copy(d, s)
		return
	}
	var b blender
	b.init(float32(factor))
	// Products of a byte and a kernel weight, tabulated: each entry is
	// the float32 product the C rounds.
	var t1, t5 [256]float32
	k1, k5 := float32(1)/13, float32(5)/13
	for v := range t1 {
		t1[v] = float32(v) * k1
		t5[v] = float32(v) * k5
	}
	stride := w * c
	copy(d[:stride], s[:stride])
	copy(d[(h-1)*stride:], s[(h-1)*stride:])
	for y := 1; y < h-1; y++ {
		up := s[(y-1)*stride : y*stride]
		mid := s[y*stride : (y+1)*stride]
		dn := s[(y+1)*stride : (y+2)*stride]
		out := d[y*stride : (y+1)*stride]
		copy(out[:c], mid[:c])
		copy(out[stride-c:], mid[stride-c:])
		for i := c; i < stride-c; i++ {
			ss := float32(0.5)
			ss += (t1[dn[i-c]] + t1[dn[i]]) + t1[dn[i+c]]
			ss += (t1[mid[i-c]] + t5[mid[i]]) + t1[mid[i+c]]
			ss += (t1[up[i-c]] + t1[up[i]]) + t1[up[i+c]]
			out[i] = b.at(clip8(ss), mid[i])
		}
	}
}

// clip8 is Pillow's float to byte conversion of filter sums: clip, then
// truncate.
func clip8(v float32) byte {
	if v <= 0 {
		return 0
	}
	if v >= 255 {
		return 255
	}
	return byte(v)
}
