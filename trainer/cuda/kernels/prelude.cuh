// prelude.cuh is prepended to every kernel source (kernels.Sources), so
// that the grid loops are written once. Guarded: the host emulator
// compiles all the sources as one file.
#ifndef LOADERD_PRELUDE
#define LOADERD_PRELUDE

// GRID_LOOP walks i over [0, n) with every thread of the grid.
#define GRID_LOOP(i, n)                                                        \
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;         \
       i < (long long)(n); i += (long long)blockDim.x * gridDim.x)

// GRID_LOOP_T is GRID_LOOP with the index type T: 32-bit where fits32
// says the range allows it, since a 64-bit division costs a GPU several
// times a 32-bit one, and im2col does four per element.
#define GRID_LOOP_T(T, i, n)                                                   \
  for (T i = (T)(blockIdx.x * blockDim.x + threadIdx.x); i < (T)(n);            \
       i += (T)(blockDim.x * gridDim.x))

#ifdef LOADERD_INDEX64  // the emulator's test of the 64-bit paths
__device__ inline bool fits32(long long) { return false; }
#else
__device__ inline bool fits32(long long n) {
  return n + (long long)blockDim.x * gridDim.x < 4294967296LL;
}
#endif

#endif
