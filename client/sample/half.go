package sample

import "math"

// Float16 returns the IEEE 754 binary16 bits nearest to f, ties to even.
// Values beyond the largest half (65504) round to ±Inf once they reach the
// midpoint 65520; tiny values become subnormals or ±0; NaN stays a quiet
// NaN with its sign.
func Float16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	man := b & 0x7fffff
	switch {
	case exp == 0xff: // Inf or NaN
		if man != 0 {
			return sign | 0x7e00 | uint16(man>>13)
		}
		return sign | 0x7c00
	case exp > 127+15: // ≥ 2^16: beyond any half, even after rounding
		return sign | 0x7c00
	case exp >= 127-14: // normal half: drop 13 mantissa bits
		h := uint32(exp-127+15)<<10 | man>>13
		// Round to nearest even; a carry out of the mantissa bumps the
		// exponent, which is exactly right (and reaches Inf at the top).
		h += roundBits(man, 13)
		return sign | uint16(h)
	case exp >= 127-25: // subnormal half (or rounds up to the smallest one)
		m := man | 0x800000      // implicit bit
		shift := uint(126 - exp) // half units are 2^-24; m's are 2^(exp-150)
		return sign | uint16(m>>shift+roundBits(m, shift))
	}
	return sign // underflows to ±0
}

// roundBits returns 1 when dropping the low n bits of m must round up under
// round-to-nearest-even, 0 otherwise.
func roundBits(m uint32, n uint) uint32 {
	half := uint32(1) << (n - 1)
	rest := m & (half<<1 - 1)
	if rest > half || rest == half && m>>n&1 == 1 {
		return 1
	}
	return 0
}

// BFloat16 returns the bfloat16 bits nearest to f (the top half of a
// float32), ties to even; NaN stays a quiet NaN.
func BFloat16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7fff + b>>16&1) >> 16)
}
