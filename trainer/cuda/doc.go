// Package cuda implements tensor.Device on NVIDIA GPUs without cgo: the
// CUDA driver, NVRTC and cuBLAS are loaded at run time (package driver),
// and the layer kernels are CUDA C sources embedded in package kernels,
// compiled by NVRTC for the GPU's architecture at New and cached as PTX.
// Where the driver's JIT refuses that PTX (an NVRTC newer than the driver
// writes a PTX ISA the driver does not know) each source is compiled to a
// CUBIN for the GPU's own sm_XY and loaded instead; Device.Code says which.
//
// A Device is one CUDA stream on the device's primary context. Kernel
// methods validate their arguments exactly as the CPU device does, then
// queue one launch; argument errors, launch failures and bad labels found
// by the loss kernels are sticky and reported by Sync (and Err), which is
// the tensor package's error model. CopyIn is asynchronous: the host slice
// must stay untouched until the next Sync; memory registered with
// RegisterHost (loaderd's shared-memory batches) makes such copies DMA and
// lets them overlap compute. CopyOut synchronises. GEMM runs on cuBLAS
// (TF32 tensor cores only with Config.TF32); without cuBLAS a reference
// kernel computes it. Convolutions run on cuDNN 9 where it loads (the
// Device is a tensor.Convolver: one call per pass over the whole batch,
// each shape's algorithms measured on its first pass, one workspace);
// without it, or with Config.NoCUDNN, layers lower them by im2col and
// GEMM, and Device.CUDNN says which and why.
//
// Without a driver New returns an error wrapping ErrNoDriver (and a
// *driver.LibError naming the paths searched); it never panics, so callers
// can fall back to tensor.CPU.
//
// Concurrency: like a CUDA stream, a Device and its Buffers must be used
// by one goroutine at a time; different Devices may be driven from
// different goroutines. Every call makes the device's context current on
// its (locked) OS thread, so goroutines may move between threads freely.
package cuda
