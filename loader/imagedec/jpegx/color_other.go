//go:build !amd64 || purego

package jpegx

// Without amd64 assembly colour conversion and upsampling run the Go code
// only.

// haveSIMD is false: there is no assembly to select (the tests read it).
var haveSIMD = false

func convertSIMD(out, y, cb, cr []byte) int { return 0 }

func h2v2SIMD(out, near, far []byte) int { return 0 }
