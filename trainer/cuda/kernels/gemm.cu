// GEMM helpers for when cuBLAS is absent or has nothing to multiply.
// Row-major, as tensor.Device.Gemm: C = alpha·op(A)·op(B) + beta·C.

extern "C" {

// C[m×n] (leading dimension ldc) *= beta; beta == 0 writes zeros without
// reading C, so NaN garbage does not survive.
__global__ void scale_matrix_f32(float* c, int m, int n, int ldc, float beta) {
  GRID_LOOP(i, (long long)m * n) {
    long long r = i / n, j = i % n;
    float* p = c + r * ldc + j;
    *p = beta == 0.0f ? 0.0f : *p * beta;
  }
}

// Reference GEMM, one thread per C element (correct, not fast): the
// fallback when cuBLAS cannot be loaded. ta, tb: 1 = transposed.
__global__ void gemm_f32(int ta, int tb, int m, int n, int k, float alpha,
                         const float* a, int lda, const float* b, int ldb,
                         float beta, float* c, int ldc) {
  GRID_LOOP(i, (long long)m * n) {
    long long r = i / n, j = i % n;
    float s = 0.0f;
    for (int p = 0; p < k; p++) {
      float av = ta ? a[(long long)p * lda + r] : a[r * lda + p];
      float bv = tb ? b[j * ldb + p] : b[(long long)p * ldb + j];
      s += av * bv;
    }
    float* cp = c + r * ldc + j;
    *cp = beta == 0.0f ? alpha * s : alpha * s + beta * *cp;
  }
}

}  // extern "C"
