package jpegx

// libjpeg's accurate integer IDCT (jidctint.c, jpeg_idct_islow): 13-bit
// constants, two extra bits of precision between the passes.
const (
	constBits = 13
	pass1Bits = 2

	fix0_298631336 = 2446
	fix0_390180644 = 3196
	fix0_541196100 = 4433
	fix0_765366865 = 6270
	fix0_899976223 = 7373
	fix1_175875602 = 9633
	fix1_501321110 = 12299
	fix1_847759065 = 15137
	fix1_961570560 = 16069
	fix2_053119869 = 16819
	fix2_562915447 = 20995
	fix3_072711026 = 25172
)

// maxPass1 bounds the values between the passes: the SIMD IDCT keeps
// them in 16-bit lanes and adds pairs of them there.
const maxPass1 = 16383

// idctGo transforms the dequantised block blk (natural order) into 8×8
// samples at dst with the given stride, as libjpeg-turbo's jsimd IDCT
// does: the C version's arithmetic, with outputs saturated to 0..255. It
// reports false if an intermediate value could have overflowed a 16-bit
// SIMD lane, where libjpeg-turbo's result is not this one.
func idctGo(dst []byte, stride int, blk *[64]int32) bool {
	var ws [64]int32
	bad := false
	for c := range 8 {
		if blk[8+c]|blk[16+c]|blk[24+c]|blk[32+c]|blk[40+c]|blk[48+c]|blk[56+c] == 0 {
			dc := blk[c] << pass1Bits
			ws[c], ws[8+c], ws[16+c], ws[24+c] = dc, dc, dc, dc
			ws[32+c], ws[40+c], ws[48+c], ws[56+c] = dc, dc, dc, dc
			bad = bad || uint32(dc+maxPass1) > 2*maxPass1
			continue
		}
		e, o := islow1D(blk[c], blk[8+c], blk[16+c], blk[24+c], blk[32+c], blk[40+c], blk[48+c], blk[56+c])
		tmp10, tmp11, tmp12, tmp13 := e[0], e[1], e[2], e[3]
		tmp0, tmp1, tmp2, tmp3 := o[0], o[1], o[2], o[3]
		const sh, rnd = constBits - pass1Bits, 1 << (constBits - pass1Bits - 1)
		o0, o7 := (tmp10+tmp3+rnd)>>sh, (tmp10-tmp3+rnd)>>sh
		o1, o6 := (tmp11+tmp2+rnd)>>sh, (tmp11-tmp2+rnd)>>sh
		o2, o5 := (tmp12+tmp1+rnd)>>sh, (tmp12-tmp1+rnd)>>sh
		o3, o4 := (tmp13+tmp0+rnd)>>sh, (tmp13-tmp0+rnd)>>sh
		ws[c], ws[8+c], ws[16+c], ws[24+c] = o0, o1, o2, o3
		ws[32+c], ws[40+c], ws[48+c], ws[56+c] = o4, o5, o6, o7
		bad = bad || uint32(o0+maxPass1) > 2*maxPass1 || uint32(o1+maxPass1) > 2*maxPass1 ||
			uint32(o2+maxPass1) > 2*maxPass1 || uint32(o3+maxPass1) > 2*maxPass1 ||
			uint32(o4+maxPass1) > 2*maxPass1 || uint32(o5+maxPass1) > 2*maxPass1 ||
			uint32(o6+maxPass1) > 2*maxPass1 || uint32(o7+maxPass1) > 2*maxPass1
	}
	if bad {
		return false
	}
	for r := range 8 {
		w := (*[8]int32)(ws[r*8:])
		out := (*[8]byte)(dst[r*stride:])
		if w[1]|w[2]|w[3]|w[4]|w[5]|w[6]|w[7] == 0 {
			v := clamp((w[0]+1<<(pass1Bits+2))>>(pass1Bits+3) + 128)
			*out = [8]byte{v, v, v, v, v, v, v, v}
			continue
		}
		e, o := islow1D(w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7])
		tmp10, tmp11, tmp12, tmp13 := e[0], e[1], e[2], e[3]
		tmp0, tmp1, tmp2, tmp3 := o[0], o[1], o[2], o[3]
		const sh, rnd = constBits + pass1Bits + 3, 1 << (constBits + pass1Bits + 2)
		out[0] = clamp((tmp10+tmp3+rnd)>>sh + 128)
		out[7] = clamp((tmp10-tmp3+rnd)>>sh + 128)
		out[1] = clamp((tmp11+tmp2+rnd)>>sh + 128)
		out[6] = clamp((tmp11-tmp2+rnd)>>sh + 128)
		out[2] = clamp((tmp12+tmp1+rnd)>>sh + 128)
		out[5] = clamp((tmp12-tmp1+rnd)>>sh + 128)
		out[3] = clamp((tmp13+tmp0+rnd)>>sh + 128)
		out[4] = clamp((tmp13-tmp0+rnd)>>sh + 128)
	}
	return true
}

// islow1D is one 8-point pass of jpeg_idct_islow before its final
// butterflies: the even part's tmp10..tmp13 and the odd part's tmp0..tmp3.
// Output k is e[k] + o[3-k], output 7-k is e[k] - o[3-k].
func islow1D(x0, x1, x2, x3, x4, x5, x6, x7 int32) (e, o [4]int32) {
	z1 := (x2 + x6) * fix0_541196100
	tmp2 := z1 - x6*fix1_847759065
	tmp3 := z1 + x2*fix0_765366865
	tmp0 := (x0 + x4) << constBits
	tmp1 := (x0 - x4) << constBits
	e = [4]int32{tmp0 + tmp3, tmp1 + tmp2, tmp1 - tmp2, tmp0 - tmp3}
	tmp0, tmp1, tmp2, tmp3 = x7, x5, x3, x1
	z1, z2, z3 := tmp0+tmp3, tmp1+tmp2, tmp0+tmp2
	z4 := tmp1 + tmp3
	z5 := (z3 + z4) * fix1_175875602
	tmp0 *= fix0_298631336
	tmp1 *= fix2_053119869
	tmp2 *= fix3_072711026
	tmp3 *= fix1_501321110
	z1 *= -fix0_899976223
	z2 *= -fix2_562915447
	z3 = z3*-fix1_961570560 + z5
	z4 = z4*-fix0_390180644 + z5
	o = [4]int32{tmp0 + z1 + z3, tmp1 + z2 + z4, tmp2 + z2 + z3, tmp3 + z1 + z4}
	return e, o
}

// idctDC is idct for a block whose only coefficient is DC.
func idctDC(dst []byte, stride int, dc int32) {
	v := clamp((dc<<pass1Bits+1<<(pass1Bits+2))>>(pass1Bits+3) + 128)
	row := [8]byte{v, v, v, v, v, v, v, v}
	for r := range 8 {
		*(*[8]byte)(dst[r*stride:]) = row
	}
}

func clamp(v int32) byte {
	if uint32(v) > 255 {
		if v < 0 {
			return 0
		}
		return 255
	}
	return byte(v)
}
