// Package driver implements run-time bindings to the CUDA driver API
// (libcuda.so.1), NVRTC (libnvrtc.so.*) and cuBLAS (libcublas.so.*) through
// github.com/ebitengine/purego: no cgo and no CUDA headers at build time,
// so a binary built without CUDA runs on a machine that has it.
//
// Libraries are sought in Options.Path (a file or directory, for a
// command-line flag), $CUDA_HOME/lib64, $CUDA_PATH/lib64, the Debian
// multiarch directory, /usr/lib64, /usr/local/cuda/lib64,
// /usr/local/nvidia/lib64, then the dynamic loader's path and the ldconfig
// cache. Every symbol is checked with Dlsym before it is registered
// (purego.RegisterLibFunc panics on a missing one). A missing library gives
// a *LibError wrapping ErrNotFound; a missing function one wrapping
// ErrSymbol.
//
// Concurrency: loading is safe from any goroutine, and the bound functions
// are plain C calls, safe wherever the C API says so (the driver API is
// thread-safe; a cuBLAS handle must be used by one goroutine at a time).
// NVRTC.Compile is safe for concurrent use.
package driver
