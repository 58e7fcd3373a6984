// Package devices implements device discovery for the trainer: NVIDIA GPUs
// through NVML (count, name, UUID, memory total and free, utilisation),
// filtered by CUDA_VISIBLE_DEVICES, and the CPU devices training runs on
// when there are none.
//
// NVML needs cgo. A build with CGO_ENABLED=0 compiles a stub that reports
// ErrNoCgo, so the module still builds everywhere. NVML is loaded at run
// time (libnvidia-ml.so.1): on a machine without the NVIDIA driver Discover
// says so (ErrNoDriver) and never calls into NVML again, because any NVML
// call after a failed load, Shutdown included, kills the process.
//
// Discover and a Report's methods are safe for concurrent use.
package devices
