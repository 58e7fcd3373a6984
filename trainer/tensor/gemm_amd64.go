//go:build amd64 && !purego

package tensor

import "golang.org/x/sys/cpu"

// sgemm6x16 is the AVX2/FMA micro-kernel in gemm_amd64.s. accum != 0 means
// C is read and scaled by beta.
//
//go:noescape
func sgemm6x16(kc int, a, b, c *float32, ldc int, alpha, beta float32, accum int)

var avx2Kernel = gemmKernel{name: "avx2-6x16", mr: 6, nr: 16, fn: kern6x16}

func kern6x16(kc int, a, b, c []float32, ldc int, alpha, beta float32) {
	// Bounds for the assembly: the packed strips and the 6×16 C tile.
	_, _, _ = a[kc*6-1], b[kc*16-1], c[5*ldc+15]
	acc := 0
	if beta != 0 {
		acc = 1
	}
	sgemm6x16(kc, &a[0], &b[0], &c[0], ldc, alpha, beta, acc)
}

func hasAVX2() bool { return cpu.X86.HasAVX2 && cpu.X86.HasFMA }

func bestKernel() gemmKernel {
	if hasAVX2() {
		return avx2Kernel
	}
	return genericKernel
}

func kernels() []gemmKernel {
	if hasAVX2() {
		return []gemmKernel{avx2Kernel, genericKernel}
	}
	return []gemmKernel{genericKernel}
}
