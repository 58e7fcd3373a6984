// Convolution and pooling helpers of tensor.Device (f32), matching
// trainer/tensor/cpu_conv.go. Gathers, not scatters: no atomics, so the
// results are deterministic and summed in the CPU's order.

template <class T>
__device__ void im2col(float* col, const float* x, int n, int C, int H, int W, int KH,
                       int KW, int stride, int pad, int OH, int OW) {
  T P = (T)OH * OW, NP = (T)n * P;
  GRID_LOOP_T(T, i, (T)C * KH * KW * NP) {
    T row = i / NP, rest = i % NP;
    T img = rest / P, p = rest % P;
    int oy = (int)(p / OW), ox = (int)(p % OW);
    int kx = (int)(row % KW), ky = (int)((row / KW) % KH), c = (int)(row / (KW * KH));
    int iy = oy * stride - pad + ky, ix = ox * stride - pad + kx;
    float v = 0.0f;
    if (iy >= 0 && iy < H && ix >= 0 && ix < W)
      v = x[(((long long)img * C + c) * H + iy) * W + ix];
    col[i] = v;
  }
}

template <class T>
__device__ void col2im(float* dx, const float* col, int n, int C, int H, int W, int KH,
                       int KW, int stride, int pad, int OH, int OW) {
  T P = (T)OH * OW, NP = (T)n * P, HW = (T)H * W;
  GRID_LOOP_T(T, i, (T)n * C * HW) {
    int ix = (int)(i % W), iy = (int)((i / W) % H);
    T pl = i / HW;
    int c = (int)(pl % C);
    T img = pl / C;
    float s = 0.0f;
    for (int ky = 0; ky < KH; ky++) {
      int ty = iy + pad - ky;
      if (ty < 0 || ty % stride != 0) continue;
      int oy = ty / stride;
      if (oy >= OH) continue;
      for (int kx = 0; kx < KW; kx++) {
        int tx = ix + pad - kx;
        if (tx < 0 || tx % stride != 0) continue;
        int ox = tx / stride;
        if (ox >= OW) continue;
        T row = ((T)c * KH + ky) * KW + kx;
        s += col[row * NP + img * P + (T)oy * OW + ox];
      }
    }
    dx[i] = s;
  }
}

extern "C" {

// col[(c·KH+ky)·KW+kx][img·P + oy·OW+ox] = x[img][c][iy][ix] or 0 (padding)
__global__ void im2col_f32(float* col, const float* x, int n, int C, int H, int W,
                           int KH, int KW, int stride, int pad, int OH, int OW) {
  if (fits32((long long)C * KH * KW * n * OH * OW))
    im2col<unsigned>(col, x, n, C, H, W, KH, KW, stride, pad, OH, OW);
  else
    im2col<long long>(col, x, n, C, H, W, KH, KW, stride, pad, OH, OW);
}

// dx[img][c][iy][ix] = Σ over (ky, kx) of the col entries that read it,
// in the CPU's (ky, kx) order; dx is overwritten.
__global__ void col2im_f32(float* dx, const float* col, int n, int C, int H, int W,
                           int KH, int KW, int stride, int pad, int OH, int OW) {
  long long cols = (long long)C * KH * KW * n * OH * OW, xs = (long long)n * C * H * W;
  if (fits32(cols > xs ? cols : xs))
    col2im<unsigned>(dx, col, n, C, H, W, KH, KW, stride, pad, OH, OW);
  else
    col2im<long long>(dx, col, n, C, H, W, KH, KW, stride, pad, OH, OW);
}

// y = window max, idx = its flat index in the input plane (first max wins)
__global__ void maxpool_f32(float* y, int* idx, const float* x, int planes, int H,
                            int W, int K, int stride, int OH, int OW) {
  long long OP = (long long)OH * OW;
  GRID_LOOP(i, (long long)planes * OP) {
    long long pl = i / OP;
    int o = (int)(i % OP), oy = o / OW, ox = o % OW;
    const float* xp = x + pl * H * W;
    int b = oy * stride * W + ox * stride;
    float best = xp[b];
    int bi = b;
    for (int ky = 0; ky < K; ky++)
      for (int kx = 0; kx < K; kx++) {
        float v = xp[b + ky * W + kx];
        if (v > best) {
          best = v;
          bi = b + ky * W + kx;
        }
      }
    y[i] = best;
    idx[i] = bi;
  }
}

// dx[j] = Σ dy over the outputs (ascending, as the CPU adds them) whose
// window covers j and whose recorded max is j; dx is overwritten. Only
// indices inside their own window count, which is all MaxPool writes.
__global__ void maxpool_backward_f32(float* dx, const float* dy, const int* idx,
                                     int planes, int H, int W, int K, int stride,
                                     int OH, int OW) {
  long long OP = (long long)OH * OW;
  GRID_LOOP(i, (long long)planes * H * W) {
    long long pl = i / ((long long)H * W);
    int j = (int)(i % ((long long)H * W));
    int iy = j / W, ix = j % W;
    int oy0 = iy - K + 1 > 0 ? (iy - K + 1 + stride - 1) / stride : 0;
    int ox0 = ix - K + 1 > 0 ? (ix - K + 1 + stride - 1) / stride : 0;
    int oy1 = min(iy / stride, OH - 1), ox1 = min(ix / stride, OW - 1);
    float s = 0.0f;
    for (int oy = oy0; oy <= oy1; oy++)
      for (int ox = ox0; ox <= ox1; ox++) {
        long long o = pl * OP + (long long)oy * OW + ox;
        if (idx[o] == j) s += dy[o];
      }
    dx[i] = s;
  }
}

}  // extern "C"
