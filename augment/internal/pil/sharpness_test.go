package pil

import (
	"math/rand/v2"
	"testing"
)

// smoothFloat is Pillow's SMOOTH filter of one value as its C computes
// it: float32 products of each byte and its weight/13, summed bottom row
// first from 0.5, then clipped and truncated. Sharpness does the same in
// integers (see there); this is the oracle.
func smoothFloat(up, mid, dn [3]byte) byte {
	var t1, t5 [256]float32
	k1, k5 := float32(1)/13, float32(5)/13
	for v := range t1 {
		t1[v] = float32(v) * k1
		t5[v] = float32(v) * k5
	}
	ss := float32(0.5)
	ss += (t1[dn[0]] + t1[dn[1]]) + t1[dn[2]]
	ss += (t1[mid[0]] + t5[mid[1]]) + t1[mid[2]]
	ss += (t1[up[0]] + t1[up[1]]) + t1[up[2]]
	if ss <= 0 {
		return 0
	}
	if ss >= 255 {
		return 255
	}
	return byte(ss)
}

// TestSharpnessIntegerFilter: the integer filter equals Pillow's float32
// one on random neighbourhoods, on ones of few levels (many equal sums),
// and at the extremes.
func TestSharpnessIntegerFilter(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	n := 300000
	if testing.Short() {
		n = 30000
	}
	for k := range n {
		var px [9]byte
		for j := range px {
			switch k % 3 {
			case 0:
				px[j] = byte(r.IntN(256))
			case 1:
				px[j] = byte(r.IntN(4) * 85) // 0, 85, 170, 255
			default:
				px[j] = byte(250 + r.IntN(6))
			}
		}
		up, mid, dn := [3]byte(px[0:3]), [3]byte(px[3:6]), [3]byte(px[6:9])
		src := Image{Pix: append(append(append([]byte{}, up[:]...), mid[:]...), dn[:]...), H: 3, W: 3, C: 1}
		dst := Image{Pix: make([]byte, 9), H: 3, W: 3, C: 1}
		Sharpness(dst, src, 0) // factor 0: the degenerate (smoothed) image itself
		if want := smoothFloat(up, mid, dn); dst.Pix[4] != want {
			t.Fatalf("neighbourhood %v: integer filter %d, Pillow's float32 %d", px, dst.Pix[4], want)
		}
	}
}
