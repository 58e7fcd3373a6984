// Reductions of tensor.Device (f32 in, double accumulation like the CPU):
// one block of REDUCE_THREADS threads per output element.

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
// channel j (o < outer, i < inner), each thread its share, with 32-bit
// index arithmetic outside the inner loop, where the loop it replaces did
// a 64-bit division per element (0.5 ms a reduction on an H100, before).
// Where inner is under the block size, the threads cover several o at once.
template <class F>
__device__ void for_channel(int j, int outer, int c, int inner, F f) {
  int t = threadIdx.x, nt = blockDim.x;
  if (inner >= nt) {
    for (int o = 0; o < outer; o++) {
      long long base = ((long long)o * c + j) * inner;
      for (int i = t; i < inner; i += nt) f(base + i);
    }
    return;
  }
  int rows = nt / inner, r = t / inner, i = t % inner;
  if (r >= rows) return;
  for (int o = r; o < outer; o += rows) f(((long long)o * c + j) * inner + i);
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

// z[j] = Σ_{o,i} x[o][j][i]; grid = c
__global__ void channel_sum_f32(float* z, const float* x, int outer, int c, int inner) {
  int j = blockIdx.x;
  double s = 0;
  for_channel(j, outer, c, inner, [&](long long k) { s += (double)x[k]; });
  s = block_sum(s);
  if (threadIdx.x == 0) z[j] = (float)s;
}

// z[j] = Σ (x − mean[j])², the difference rounded to f32 as on the CPU
__global__ void channel_sqdev_f32(float* z, const float* x, const float* mean,
                                  int outer, int c, int inner) {
  int j = blockIdx.x;
  float m = mean[j];
  double s = 0;
  for_channel(j, outer, c, inner, [&](long long k) {
    double e = (double)(x[k] - m);
    s += e * e;
  });
  s = block_sum(s);
  if (threadIdx.x == 0) z[j] = (float)s;
}

// sdy[j] = Σ dy, sdyx[j] = Σ dy·(x − mean)·invstd; grid = c
__global__ void bn_grad_sums_f32(float* sdy, float* sdyx, const float* dy,
                                 const float* x, const float* mean,
                                 const float* invstd, int n, int c, int hw) {
  int j = blockIdx.x;
  float m = mean[j], is = invstd[j];
  double a = 0, b = 0;
  for_channel(j, n, c, hw, [&](long long k) {
    double g = (double)dy[k];
    a += g;
    b += g * (double)((x[k] - m) * is);
  });
  a = block_sum(a);
  b = block_sum(b);
  if (threadIdx.x == 0) {
    sdy[j] = (float)a;
    sdyx[j] = (float)b;
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
