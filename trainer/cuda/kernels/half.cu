// Mixed-precision kernels of tensor.Device: Round (a float32 buffer
// rounded to bfloat16 or float16 and back, in place) and NonFinite (the
// loss scaler's Inf/NaN check). The rounding is the bit arithmetic of
// tensor.RoundBF16 and tensor.RoundFP16, not cuda_fp16.h's conversions,
// so that the emulator and every compiler give the CPU's bits.

extern "C" {

__device__ unsigned round_bf16_bits(unsigned b) {
  if ((b & 0x7fffffffu) > 0x7f800000u) return (b | 0x00400000u) & 0xffff0000u;
  return (b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u;
}

__device__ unsigned round_fp16_bits(unsigned b) {
  unsigned sign = b & 0x80000000u, a = b & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7fc00000u | (a & 0x007fe000u);
  if (a >= 0x47800000u) return sign | 0x7f800000u;
  if (a >= 0x38800000u) {
    unsigned r = (a + 0xfffu + ((a >> 13) & 1u)) & ~0x1fffu;
    return r > 0x477fe000u ? (sign | 0x7f800000u) : (sign | r);
  }
  if (a >= 0x33000000u) {
    unsigned m = (a & 0x7fffffu) | 0x800000u;
    unsigned shift = 126u - (a >> 23);
    unsigned q = m >> shift, half = 1u << (shift - 1u);
    unsigned rem = m & (2u * half - 1u);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return sign | __float_as_uint((float)q * (1.0f / 16777216.0f));
  }
  return sign;
}

// mode 1: bfloat16, 2: float16 (tensor.Precision)
__global__ void round_f32(float* x, int n, int mode) {
  GRID_LOOP(i, n) {
    unsigned b = __float_as_uint(x[i]);
    x[i] = __uint_as_float(mode == 1 ? round_bf16_bits(b) : round_fp16_bits(b));
  }
}

// z[0] |= 1.0f's bits when an element is ±Inf or NaN; z[0] is zeroed
// first. The OR of 1.0f's bits into +0 is 1.0f, whoever writes first.
__global__ void nonfinite_f32(float* z, const float* x, int n) {
  int found = 0;
  GRID_LOOP(i, n) {
    if ((__float_as_uint(x[i]) & 0x7f800000u) == 0x7f800000u) found = 1;
  }
  if (found) atomicOr((int*)z, 0x3f800000);
}

}  // extern "C"
