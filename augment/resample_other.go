//go:build !amd64 || purego

package augment

// Without amd64 assembly the resampler runs its Go passes only.

var haveSIMD = false

func hpass3AVX2(dst, src *byte, nx int, start *int32, pairs int, w *int32) {
	panic("augment: no SIMD resampler")
}

func hpass3x2AVX2(dst, src *byte, dstride, sstride, nx int, start *int32, pairs int, w *int32) {
	panic("augment: no SIMD resampler")
}

func vpassAVX2(dst, src *byte, stride, n int, k *int32, ntaps int) {
	panic("augment: no SIMD resampler")
}
