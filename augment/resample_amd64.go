//go:build amd64 && !purego

package augment

import "golang.org/x/sys/cpu"

// hpass3AVX2 is the horizontal pass over one RGB row (resample_amd64.s).
//
//go:noescape
func hpass3AVX2(dst, src *byte, nx int, start *int32, pairs int, w *int32)

// hpass3x2AVX2 is hpass3AVX2 over two rows.
//
//go:noescape
func hpass3x2AVX2(dst, src *byte, dstride, sstride, nx int, start *int32, pairs int, w *int32)

// vpassAVX2 is one output row of the vertical pass, n a multiple of 32.
//
//go:noescape
func vpassAVX2(dst, src *byte, stride, n int, k *int32, ntaps int)

// haveSIMD selects the assembly passes; the tests turn it off to hold
// them to the Go ones.
var haveSIMD = cpu.X86.HasAVX2
