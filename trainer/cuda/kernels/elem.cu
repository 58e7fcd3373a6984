// Elementwise kernels of tensor.Device (f32). Each mirrors the CPU kernel
// in trainer/tensor/cpu_elem.go, cpu_reduce.go or cpu_loss.go with the same
// operation order; compiled with --fmad=false so that no multiply-add is
// fused and results match the CPU bit for bit where the order is the same.

template <class T>
__device__ void transpose12(float* z, const float* x, int A, int B, int inner) {
  GRID_LOOP_T(T, i, (T)A * B * inner) {
    T r = i / inner, k = i % inner;
    T j = r / A, a = r % A;
    z[i] = x[(a * B + j) * inner + k];
  }
}

// y = gamma·(x − mean)·invstd + beta, rows = n·c planes of hw; T is the
// index type (32-bit where it fits: the channel of each element costs a
// division, several times dearer in 64 bits).
template <class T>
__device__ void bn_forward(float* y, const float* x, const float* mean, const float* invstd,
                           const float* gamma, const float* beta, int rows, int c, int hw) {
  GRID_LOOP_T(T, i, (long long)rows * hw) {
    int j = (int)((i / (T)hw) % (T)c);
    float k = gamma[j] * invstd[j];
    float b = beta[j] - mean[j] * k;
    y[i] = x[i] * k + b;
  }
}

// dx = gamma·invstd·(dy − sdy/M − x̂·sdyx/M), M = cnt[0]
template <class T>
__device__ void bn_backward(float* dx, const float* dy, const float* x, const float* mean,
                            const float* invstd, const float* gamma, const float* sdy,
                            const float* sdyx, const float* cnt, int rows, int c, int hw) {
  float inv = 1.0f / cnt[0];
  GRID_LOOP_T(T, i, (long long)rows * hw) {
    int j = (int)((i / (T)hw) % (T)c);
    float is = invstd[j];
    float k = gamma[j] * is;
    float mdy = sdy[j] * inv;
    float mdx = sdyx[j] * inv * is;
    dx[i] = k * (dy[i] - mdy - (x[i] - mean[j]) * mdx);
  }
}

extern "C" {

__global__ void fill_f32(float* x, int n, float v) {
  GRID_LOOP(i, n) x[i] = v;
}

__global__ void scale_f32(float* x, int n, float a) {
  GRID_LOOP(i, n) x[i] *= a;
}

// y += a·x
__global__ void axpy_f32(float* y, const float* x, int n, float a) {
  GRID_LOOP(i, n) y[i] += a * x[i];
}

// z = x + y (z may alias x or y)
__global__ void add_f32(float* z, const float* x, const float* y, int n) {
  GRID_LOOP(i, n) z[i] = x[i] + y[i];
}

// z = x / d[0]
__global__ void div_scalar_f32(float* z, const float* x, const float* d, int n) {
  float s = d[0];
  GRID_LOOP(i, n) z[i] = x[i] / s;
}

// y = max(x, 0) on the bits, as the CPU does: negatives (and −0) become +0.
__global__ void relu_f32(float* y, const float* x, int n) {
  GRID_LOOP(i, n) {
    unsigned b = __float_as_uint(x[i]);
    y[i] = __uint_as_float(b & ~(unsigned)((int)b >> 31));
  }
}

// dx = dy where y > 0, else +0
__global__ void relu_backward_f32(float* dx, const float* dy, const float* y, int n) {
  GRID_LOOP(i, n) {
    int yb = __float_as_int(y[i]);
    unsigned m = (unsigned)(-yb >> 31);
    dx[i] = __uint_as_float(__float_as_uint(dy[i]) & m);
  }
}

// z = 1/sqrt(v + eps), in double like the CPU
__global__ void bn_invstd_f32(float* z, const float* v, int n, float eps) {
  GRID_LOOP(i, n) z[i] = (float)(1.0 / sqrt((double)v[i] + (double)eps));
}

__global__ void bn_running_f32(float* rm, float* rv, const float* m, const float* v,
                               const float* cnt, int n, float mom) {
  float unb = 1.0f;
  if (cnt[0] > 1.0f) unb = cnt[0] / (cnt[0] - 1.0f);
  GRID_LOOP(i, n) {
    rm[i] = (1.0f - mom) * rm[i] + mom * m[i];
    rv[i] = (1.0f - mom) * rv[i] + mom * v[i] * unb;
  }
}

// x[r][i] += b[r % c] over rows×inner, rows = outer·c
__global__ void add_bias_f32(float* x, const float* b, int rows, int c, int inner) {
  GRID_LOOP(i, (long long)rows * inner) x[i] += b[(i / inner) % c];
}

// z[r][j] = a·x[r]
__global__ void row_broadcast_f32(float* z, const float* x, int rows, int cols, float a) {
  GRID_LOOP(i, (long long)rows * cols) z[i] = a * x[i / cols];
}

// [A][B][inner] → [B][A][inner]; i indexes dst.
__global__ void transpose12_f32(float* z, const float* x, int A, int B, int inner) {
  if (fits32((long long)A * B * inner))
    transpose12<unsigned>(z, x, A, B, inner);
  else
    transpose12<long long>(z, x, A, B, inner);
}

__global__ void bn_forward_f32(float* y, const float* x, const float* mean,
                               const float* invstd, const float* gamma,
                               const float* beta, int rows, int c, int hw) {
  if (fits32((long long)rows * hw))
    bn_forward<unsigned>(y, x, mean, invstd, gamma, beta, rows, c, hw);
  else
    bn_forward<long long>(y, x, mean, invstd, gamma, beta, rows, c, hw);
}

__global__ void bn_backward_f32(float* dx, const float* dy, const float* x,
                                const float* mean, const float* invstd,
                                const float* gamma, const float* sdy,
                                const float* sdyx, const float* cnt, int rows,
                                int c, int hw) {
  if (fits32((long long)rows * hw))
    bn_backward<unsigned>(dx, dy, x, mean, invstd, gamma, sdy, sdyx, cnt, rows, c, hw);
  else
    bn_backward<long long>(dx, dy, x, mean, invstd, gamma, sdy, sdyx, cnt, rows, c, hw);
}

// One torch.optim.SGD step; buf is unused (may be null) when mom == 0.
__global__ void sgd_f32(float* p, const float* g, float* buf, int n, float lr,
                        float mom, float damp, float wd, int nesterov, int first) {
  GRID_LOOP(i, n) {
    float dp = g[i];
    if (wd != 0.0f) dp += wd * p[i];
    if (mom != 0.0f) {
      float b;
      if (first) {
        b = dp;
      } else {
        b = mom * buf[i] + (1.0f - damp) * dp;
      }
      buf[i] = b;
      if (nesterov) {
        dp += mom * b;
      } else {
        dp = b;
      }
    }
    p[i] -= lr * dp;
  }
}

}  // extern "C"
