//go:build amd64 && !purego

package jpegx

import "golang.org/x/sys/cpu"

// yccRGBAVX2 converts n pixels, a multiple of 16 (color_amd64.s).
//
//go:noescape
func yccRGBAVX2(out, y, cb, cr *byte, n int)

// h2v2AVX2 upsamples n chroma columns, a multiple of 16, reading one
// column beyond each end (color_amd64.s).
//
//go:noescape
func h2v2AVX2(out, near, far *byte, n int)

// haveSIMD selects the assembly; the tests turn it off to hold it to the
// Go code.
var haveSIMD = cpu.X86.HasAVX2

// convertSIMD converts the first multiple of 16 pixels of a row and
// returns how many it did.
func convertSIMD(out, y, cb, cr []byte) int {
	n := len(y) &^ 15
	if !haveSIMD || n == 0 || len(cb) < n || len(cr) < n || len(out) < 3*n {
		return 0
	}
	yccRGBAVX2(&out[0], &y[0], &cb[0], &cr[0], n)
	return n
}

// h2v2SIMD upsamples the first multiple of 16 columns of padded rows
// (near[0] and near[len-1] stand in for the missing neighbours of the
// real columns 1..len-2) and returns how many columns it did.
func h2v2SIMD(out, near, far []byte) int {
	n := (len(near) - 2) &^ 15
	if !haveSIMD || n == 0 || len(far) != len(near) || len(out) < 2*n {
		return 0
	}
	h2v2AVX2(&out[0], &near[1], &far[1], n)
	return n
}
