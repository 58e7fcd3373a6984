// Reductions of tensor.Device (f32 in, double accumulation like the CPU):
// one block of REDUCE_THREADS threads per output element, or per share of
// one (the split channel reductions).

#define REDUCE_THREADS 256

// block_sum returns the block-wide sum of v to every thread.
__device__ double block_sum(double v) {
  __shared__ double sh[REDUCE_THREADS];
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  double r = sh[0];
  __syncthreads();  // sh is reused by a second call
  return r;
}

// for_channel calls f(k) for every flat index k = (o·c + j)·inner + i of
// channel j with o0 ≤ o < o1 and i < inner, each thread its share, with
// 32-bit index arithmetic outside the inner loop, where the loop it
// replaces did a 64-bit division per element (0.5 ms a reduction on an
// H100, before). Where inner is under the block size, the threads cover
// several o at once.
template <class F>
__device__ void for_channel(int j, int o0, int o1, int c, int inner, F f) {
  int t = threadIdx.x, nt = blockDim.x;
  if (inner >= nt) {
    for (int o = o0; o < o1; o++) {
      long long base = ((long long)o * c + j) * inner;
      for (int i = t; i < inner; i += nt) f(base + i);
    }
    return;
  }
  int rows = nt / inner, r = t / inner, i = t % inner;
  if (r >= rows) return;
  for (int o = o0 + r; o < o1; o += rows) f(((long long)o * c + j) * inner + i);
}

// Split channel reductions: block b reduces channel j = b / splits over
// its share s = b % splits of the outer index, so that a few channels of
// a large batch still fill the GPU (one block a channel kept 64 of an
// H100's 132 SMs busy on ResNet's first stage, at a fraction of the
// memory bandwidth). With splits > 1 each block leaves its two sums in
// part[(j·splits + s)·2 + {0, 1}] and channel_parts adds them in order:
// the result does not depend on scheduling.
__device__ void split_range(int outer, int splits, int* j, int* o0, int* o1) {
  int b = blockIdx.x, s = b % splits;
  *j = b / splits;
  *o0 = (int)((long long)outer * s / splits);
  *o1 = (int)((long long)outer * (s + 1) / splits);
}

__device__ void split_out(double a, double b, float* za, float* zb, double* part, int splits, int j) {
  if (threadIdx.x != 0) return;
  if (splits == 1) {
    za[j] = (float)a;
    if (zb) zb[j] = (float)b;
    return;
  }
  part[2 * blockIdx.x] = a;
  part[2 * blockIdx.x + 1] = b;
}

extern "C" {

// z[r] = a·Σ_j x[r][j]; grid = rows
__global__ void row_sum_f32(float* z, const float* x, int rows, int cols, float a) {
  int r = blockIdx.x;
  const float* row = x + (long long)r * cols;
  double s = 0;
  for (int j = threadIdx.x; j < cols; j += blockDim.x) s += (double)row[j];
  s = block_sum(s);
  if (threadIdx.x == 0) z[r] = a * (float)s;
}

// z[j] = Σ_{o,i} x[o][j][i]; grid = c·splits
__global__ void channel_sum_f32(float* z, const float* x, int outer, int c, int inner,
                                double* part, int splits) {
  int j, o0, o1;
  split_range(outer, splits, &j, &o0, &o1);
  double s = 0;
  for_channel(j, o0, o1, c, inner, [&](long long k) { s += (double)x[k]; });
  s = block_sum(s);
  split_out(s, 0, z, nullptr, part, splits, j);
}

// z[j] = Σ (x − mean[j])², the difference rounded to f32 as on the CPU
__global__ void channel_sqdev_f32(float* z, const float* x, const float* mean,
                                  int outer, int c, int inner, double* part, int splits) {
  int j, o0, o1;
  split_range(outer, splits, &j, &o0, &o1);
  float m = mean[j];
  double s = 0;
  for_channel(j, o0, o1, c, inner, [&](long long k) {
    double e = (double)(x[k] - m);
    s += e * e;
  });
  s = block_sum(s);
  split_out(s, 0, z, nullptr, part, splits, j);
}

// sdy[j] = Σ dy, sdyx[j] = Σ dy·(x − mean)·invstd; grid = c·splits
__global__ void bn_grad_sums_f32(float* sdy, float* sdyx, const float* dy,
                                 const float* x, const float* mean,
                                 const float* invstd, int n, int c, int hw,
                                 double* part, int splits) {
  int j, o0, o1;
  split_range(n, splits, &j, &o0, &o1);
  float m = mean[j], is = invstd[j];
  double a = 0, b = 0;
  for_channel(j, o0, o1, c, hw, [&](long long k) {
    double g = (double)dy[k];
    a += g;
    b += g * (double)((x[k] - m) * is);
  });
  a = block_sum(a);
  b = block_sum(b);
  split_out(a, b, sdy, sdyx, part, splits, j);
}

// za[j] = Σ_s part[(j·splits + s)·2], zb likewise from the second sums
// (zb may be null); one thread a channel, in order of s.
__global__ void channel_parts_f32(float* za, float* zb, const double* part, int c, int splits) {
  for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < c; j += gridDim.x * blockDim.x) {
    double a = 0, b = 0;
    for (int s = 0; s < splits; s++) {
      a += part[2 * (j * splits + s)];
      b += part[2 * (j * splits + s) + 1];
    }
    za[j] = (float)a;
    if (zb) zb[j] = (float)b;
  }
}

// z[0] = number of rows whose first arg-max equals the label; grid = 1
__global__ void count_correct_f32(float* z, const float* logits, const int* labels,
                                  int n, int c) {
  double k = 0;
  for (int r = threadIdx.x; r < n; r += blockDim.x) {
    const float* row = logits + (long long)r * c;
    int bi = 0;
    for (int j = 1; j < c; j++)
      if (row[j] > row[bi]) bi = j;
    if (bi == labels[r]) k += 1;
  }
  k = block_sum(k);
  if (threadIdx.x == 0) z[0] = (float)k;
}

}  // extern "C"
