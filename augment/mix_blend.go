package augment

import (
	"encoding/binary"
	"math"

	"github.com/loaderd/loaderd/client/sample"
)

// blend is MixUp on one sample: dst = dst·own + src·other per element,
// each product rounded to float32 and their sum rounded once to the
// dtype. The explicit float32 conversions keep Go from fusing the
// multiply and add (which torch's two ops do not).
func blend(dst, src []byte, dt sample.DType, own, other float32) {
	switch dt {
	case sample.F32:
		for i := 0; i+4 <= len(dst); i += 4 {
			a := math.Float32frombits(binary.LittleEndian.Uint32(dst[i:]))
			b := math.Float32frombits(binary.LittleEndian.Uint32(src[i:]))
			binary.LittleEndian.PutUint32(dst[i:], math.Float32bits(float32(a*own)+float32(b*other)))
		}
	case sample.F16:
		for i := 0; i+2 <= len(dst); i += 2 {
			a := f16to32(binary.LittleEndian.Uint16(dst[i:]))
			b := f16to32(binary.LittleEndian.Uint16(src[i:]))
			binary.LittleEndian.PutUint16(dst[i:], sample.Float16(float32(a*own)+float32(b*other)))
		}
	case sample.BF16:
		for i := 0; i+2 <= len(dst); i += 2 {
			a := bf16to32(binary.LittleEndian.Uint16(dst[i:]))
			b := bf16to32(binary.LittleEndian.Uint16(src[i:]))
			binary.LittleEndian.PutUint16(dst[i:], sample.BFloat16(float32(a*own)+float32(b*other)))
		}
	}
}

// f16to32 widens IEEE binary16 bits to float32, exactly.
func f16to32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // Inf, NaN
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp == 0: // zero or subnormal: man·2^-24
		v := float32(man) * 0x1p-24
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
}

// bf16to32 widens bfloat16 bits to float32, exactly.
func bf16to32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }
