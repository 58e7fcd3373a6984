//go:build !amd64 || purego

package jpegx

// Without amd64 assembly the IDCT is idctGo.

const asmBuilt = false

var useAVX2 = false

func idctAVX2(dst *byte, stride int, blk *[64]int32) int {
	panic("jpegx: no assembly IDCT")
}

func idct(dst []byte, stride int, blk *[64]int32) bool {
	return idctGo(dst, stride, blk)
}

func asmFits(n, stride int) bool { return false }
