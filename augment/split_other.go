//go:build !amd64 || purego

package augment

// Without amd64 assembly HWC → CHW runs splitFwd/splitRev only.

var haveSplitSIMD = false

func splitRows32(d0, d1, d2 []uint32, s [][3]byte, lut *[3][256]uint32, g *geom) {
	panic("augment: no SIMD split")
}

func splitRows8(d0, d1, d2 []byte, s [][3]byte, lut *[3][256]uint8, g *geom) {
	panic("augment: no SIMD split")
}
