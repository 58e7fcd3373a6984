package jpegx

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestColorSIMD holds the assembly colour conversion and 4:2:0
// upsampling to the Go code on random rows of every length up to 100,
// including extreme sample values.
func TestColorSIMD(t *testing.T) {
	if !haveSIMD {
		t.Skip("skipped: no AVX2 (or -tags purego)")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	row := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			switch rng.IntN(4) {
			case 0:
				b[i] = 0
			case 1:
				b[i] = 255
			default:
				b[i] = byte(rng.IntN(256))
			}
		}
		return b
	}
	both := func(f func()) {
		haveSIMD = false
		f()
		haveSIMD = true
		f()
	}
	for trial := range 2000 {
		n := 1 + trial%100
		y, cb, cr := row(n), row(n), row(n)
		var outs [2][]byte
		k := 0
		both(func() {
			outs[k] = make([]byte, 3*n)
			convert(outs[k], y, cb, cr)
			k++
		})
		if !bytes.Equal(outs[0], outs[1]) {
			t.Fatalf("convert, %d pixels: Go %v, AVX2 %v", n, outs[0], outs[1])
		}
		near, far := row(n+2), row(n+2)
		k = 0
		both(func() {
			outs[k] = make([]byte, 2*n)
			up420(outs[k], near, far)
			k++
		})
		if !bytes.Equal(outs[0], outs[1]) {
			t.Fatalf("up420, %d columns: Go %v, AVX2 %v", n, outs[0], outs[1])
		}
	}
}
