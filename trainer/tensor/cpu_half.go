package tensor

import (
	"fmt"
	"math"
)

// Precision is a floating-point format Round rounds float32 values to.
type Precision uint8

const (
	F32Exact Precision = iota // no rounding: Round is a no-op
	BF16                      // bfloat16: 8-bit exponent, 7-bit mantissa
	FP16                      // IEEE binary16: 5-bit exponent, 10-bit mantissa
)

func (p Precision) String() string {
	if p > FP16 {
		return fmt.Sprintf("Precision(%d)", uint8(p))
	}
	return [...]string{"f32", "bf16", "fp16"}[p]
}

// RoundBF16 returns the float32 bits of b rounded to bfloat16, ties to
// even; a NaN stays a (quiet) NaN. The CUDA kernel round_f32 is the same
// bit arithmetic, so both engines round identically.
func RoundBF16(b uint32) uint32 {
	if b&0x7fffffff > 0x7f800000 {
		return (b | 0x00400000) & 0xffff0000
	}
	return (b + 0x7fff + (b >> 16 & 1)) & 0xffff0000
}

// RoundFP16 returns the float32 bits of b rounded to IEEE binary16, ties
// to even, overflowing to ±Inf from 65520 and through fp16's subnormals
// to ±0, exactly as a conversion to half and back would.
func RoundFP16(b uint32) uint32 {
	sign, a := b&0x80000000, b&0x7fffffff
	switch {
	case a > 0x7f800000: // NaN: quiet, the payload's top 10 bits kept
		return sign | 0x7fc00000 | a&0x007fe000
	case a >= 0x47800000: // ≥ 2¹⁶ (and Inf)
		return sign | 0x7f800000
	case a >= 0x38800000: // normal half range: keep 10 mantissa bits
		r := (a + 0xfff + (a >> 13 & 1)) &^ 0x1fff
		if r > 0x477fe000 { // rounded past 65504
			return sign | 0x7f800000
		}
		return sign | r
	case a >= 0x33000000: // half subnormals: multiples of 2⁻²⁴
		m := a&0x7fffff | 0x800000
		shift := 126 - a>>23 // 14..24
		q := m >> shift
		half := uint32(1) << (shift - 1)
		if rem := m & (2*half - 1); rem > half || rem == half && q&1 == 1 {
			q++
		}
		return sign | math.Float32bits(float32(q)*(1.0/(1<<24)))
	}
	return sign
}

// Round rounds every element of x to precision p and back, in place.
func (d *CPU) Round(x Buffer, p Precision) {
	v := d.fvAny("round", x)
	if v == nil {
		return
	}
	if p > FP16 {
		d.fail(argErr("round", "unknown precision %v", p))
		return
	}
	if p == F32Exact {
		return
	}
	d.a.x, d.a.c = v, int(p)
	d.elem(opRound, len(v))
}

func roundRange(x []float32, p Precision) {
	if p == BF16 {
		for i, v := range x {
			x[i] = math.Float32frombits(RoundBF16(math.Float32bits(v)))
		}
		return
	}
	for i, v := range x {
		x[i] = math.Float32frombits(RoundFP16(math.Float32bits(v)))
	}
}

// NonFinite sets dst[0] to 1 when any element of x is ±Inf or NaN, else 0:
// the check a loss scaler makes before an optimizer step.
func (d *CPU) NonFinite(dst, x Buffer) {
	v := d.fvAny("nonfinite", x)
	z := d.fv("nonfinite", dst, 1)
	if v == nil || z == nil {
		return
	}
	// An exponent of all ones is Inf or NaN.
	found := float32(0)
	for _, f := range v {
		if math.Float32bits(f)&0x7f800000 == 0x7f800000 {
			found = 1
			break
		}
	}
	z[0] = found
}
