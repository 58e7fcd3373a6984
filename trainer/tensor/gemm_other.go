//go:build !amd64 || purego

package tensor

func bestKernel() gemmKernel { return genericKernel }

// Kernels lists the micro-kernels usable on this machine (tests use it).
func kernels() []gemmKernel { return []gemmKernel{genericKernel} }
