// Package kernels implements the CUDA C kernels of the CUDA tensor.Device:
// the sources are embedded (*.cu), compiled by NVRTC for the device's
// virtual architecture (compute_XY) and cached on disk as PTX keyed by a
// hash of source and options (os.UserCacheDir()/loaderd/ptx). BuildCUBIN
// compiles one source to machine code for a real architecture (sm_XY),
// cached beside the PTX, for drivers whose JIT refuses the PTX.
//
// Every kernel mirrors a CPU kernel of package tensor with the same
// operation order; they are compiled with --fmad=false so that rounding
// matches. Reductions accumulate in double like the CPU.
//
// Concurrency: Sources, Build and Cache are safe for concurrent use
// (cache files are written atomically).
package kernels
