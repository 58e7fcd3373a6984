// Package tensor implements a small f32 tensor engine behind a Device
// interface: device buffers, host↔device copies, GEMM and the elementwise,
// reduction, convolution, pooling, batch-norm, loss and optimizer kernels
// that the layers in package nn need.
//
// The interface follows the CUDA model so that a GPU device can implement it
// later: a Device is one ordered stream of work. Kernel methods take Buffers
// (views of device allocations, never Go slices), return nothing, and may run
// asynchronously; an argument error (wrong length, dtype or device) makes the
// kernel do nothing and is kept as a sticky error that Sync and Err report,
// the way CUDA reports asynchronous faults. Host slices handed to CopyIn must
// stay untouched until the next Sync; CopyOut synchronises.
//
// CPU is the host implementation. Several CPU devices can exist at once, each
// with its own goroutine budget, to stand in for several GPUs. Its GEMM is a
// blocked, packed, multi-goroutine kernel with an AVX2/FMA micro-kernel on
// amd64 (pure Go elsewhere, or with the purego build tag).
//
// Concurrency: a Device (and every Buffer on it) must be used by one
// goroutine at a time, like a CUDA stream; different devices may be driven
// from different goroutines concurrently. Buffer values are immutable views
// and safe to copy and share.
package tensor
