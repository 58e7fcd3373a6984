// Softmax cross-entropy of tensor.Device (f32), matching
// trainer/tensor/cpu_loss.go. A label outside [0, c) sets bit 0 of
// *status, which the device reads at Sync and reports as an argument error.

extern "C" {

// prob = softmax(logits) per row; loss[r] = −Σ_j q_j·log p_j with
// q = (1−eps)·onehot + eps/c. One thread per row, double like the CPU.
__global__ void softmax_ce_f32(float* loss, float* prob, const float* logits,
                               const int* labels, int* status, int n, int c,
                               float eps) {
  GRID_LOOP(r, n) {
    int y = labels[r];
    if (y < 0 || y >= c) {
      atomicOr(status, 1);
      continue;
    }
    const float* x = logits + r * c;
    float* p = prob + r * c;
    float m = x[0];
    for (int j = 0; j < c; j++) m = fmaxf(m, x[j]);
    double s = 0, sumLog = 0;
    for (int j = 0; j < c; j++) {
      double e = exp((double)(x[j] - m));
      p[j] = (float)e;
      s += e;
    }
    double ls = log(s);
    for (int j = 0; j < c; j++) {
      p[j] = (float)((double)p[j] / s);
      sumLog += (double)(x[j] - m) - ls;
    }
    double ly = (double)(x[y] - m) - ls;
    double e = (double)eps;
    loss[r] = (float)(-(1 - e) * ly - e / (double)c * sumLog);
  }
}

// dlogits = scale·(prob − q)
__global__ void softmax_ce_backward_f32(float* dl, const float* prob,
                                        const int* labels, int* status, int n,
                                        int c, float eps, float scale) {
  float off = eps / (float)c;
  GRID_LOOP(i, (long long)n * c) {
    long long r = i / c;
    int j = (int)(i % c);
    int y = labels[r];
    if (y < 0 || y >= c) {
      if (j == 0) atomicOr(status, 1);
      continue;
    }
    float g = scale * (prob[i] - off);
    if (j == y) g -= scale * (1.0f - eps);
    dl[i] = g;
  }
}

}  // extern "C"
