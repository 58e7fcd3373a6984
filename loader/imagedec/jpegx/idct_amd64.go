//go:build amd64 && !purego

package jpegx

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// idctAVX2 is idctGo in AVX2 (idct_amd64.s) on 8 rows of 8 bytes at dst:
// 1 when it wrote them, 0 when idctGo would return false, -1 when the
// block is one idctGo must do (a coefficient no decoded block holds).
//
//go:noescape
func idctAVX2(dst *byte, stride int, blk *[64]int32) int

// asmBuilt says this build has the assembly IDCT.
const asmBuilt = true

// useAVX2 selects the assembly IDCT; the tests check it is on where the
// CPU allows.
var useAVX2 = cpu.X86.HasAVX2

// idct is idctGo, in AVX2 where the CPU has it. Odd slices (too short,
// or rows overlapping) go to idctGo so that it decides what happens.
func idct(dst []byte, stride int, blk *[64]int32) bool {
	if useAVX2 && asmFits(len(dst), stride) {
		if r := idctAVX2(unsafe.SliceData(dst), stride, blk); r >= 0 {
			return r != 0
		}
	}
	return idctGo(dst, stride, blk)
}

// asmFits says whether 8 rows of 8 bytes at stride fit in n bytes without
// overlapping (no overflow: stride <= n).
func asmFits(n, stride int) bool {
	return stride >= 8 && stride <= n && 7*stride+8 <= n
}
