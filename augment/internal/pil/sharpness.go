package pil

// Sharpness performs F.adjust_sharpness (ImageEnhance.Sharpness): a blend
// with the image smoothed by Pillow's SMOOTH filter, the 3x3 kernel
// (1 1 1 / 1 5 1 / 1 1 1)/13. Pillow keeps the outermost pixels, and
// copies images smaller than the kernel whole, so those pixels blend with
// themselves.
//
// Pillow filters in float32 (the kernel divided by 13, a 0.5 rounding
// offset, truncation); this filters in integers, with the same bytes: the
// exact sum is 0.5 + N/13 for the integer N of the weighted pixels, which
// is (2N+13)/26 and so at least 1/26 from any integer, while float32's
// rounding moves a sum below 256 by less than 1e-4; truncating either
// gives floor((2N+13)/26), and neither reaches 0 or 255.5, so the clip
// changes nothing.
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
		// Each i reads i-c, i, i+c of three rows: slices shifted by c let
		// the compiler drop the bounds checks.
		n := stride - 2*c
		u0, u1, u2 := up[:n], up[c:c+n], up[2*c:2*c+n]
		m0, m1, m2 := mid[:n], mid[c:c+n], mid[2*c:2*c+n]
		d0, d1, d2 := dn[:n], dn[c:c+n], dn[2*c:2*c+n]
		o := out[c : c+n]
		for i := range o {
			sum := uint32(u0[i]) + uint32(u1[i]) + uint32(u2[i]) +
				uint32(m0[i]) + 5*uint32(m1[i]) + uint32(m2[i]) +
				uint32(d0[i]) + uint32(d1[i]) + uint32(d2[i])
			o[i] = b.at(byte((2*sum+13)/26), m1[i])
		}
	}
}
