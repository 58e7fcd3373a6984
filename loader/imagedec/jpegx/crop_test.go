package jpegx

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestDecodeRGBCrop: for progressive files of every subsampling and a
// sequential one, every window — all 1×1 to 3×3 ones at the corners and
// edges, and hundreds of random ones — holds the whole decode's pixels,
// whatever the samples outside the window's blocks hold.
func TestDecodeRGBCrop(t *testing.T) {
	files := append(slices.Clone(progFiles), "../../testdata/formats/img/shapes.q50.420.jpeg",
		"../../testdata/formats/img/shapes.q50.422.jpeg")
	rng := rand.New(rand.NewPCG(7, 8))
	var d Decoder
	for _, name := range files {
		data := readFile(t, name)
		whole, err := decodeFresh(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		w, h, _ := frameSize(data)
		var wins [][4]int
		for _, x := range []int{0, 1, w/2 - 1, w - 3} {
			for _, y := range []int{0, 1, h/2 - 1, h - 3} {
				for s := 1; s <= 3; s++ {
					wins = append(wins, [4]int{x, y, s, s})
				}
			}
		}
		for range 300 {
			ww, wh := 1+rng.IntN(w), 1+rng.IntN(h)
			wins = append(wins, [4]int{rng.IntN(w - ww + 1), rng.IntN(h - wh + 1), ww, wh})
		}
		wins = append(wins, [4]int{0, 0, w, h})
		for _, wn := range wins {
			x, y, ww, wh := wn[0], wn[1], wn[2], wn[3]
			got := make([]byte, ww*wh*3)
			// Whatever a window does not decode holds an earlier image's
			// samples: poison them.
			for i := range d.plane {
				d.plane[i] = byte(i*131 + 7)
			}
			if err := d.DecodeRGBCrop(data, got, x, y, ww, wh); err != nil {
				t.Fatalf("%s: window %v: %v", name, wn, err)
			}
			for r := range wh {
				if !bytes.Equal(got[r*ww*3:(r+1)*ww*3], whole[((y+r)*w+x)*3:][:ww*3]) {
					t.Fatalf("%s (%dx%d): window %v row %d differs from the whole decode", name, w, h, wn, r)
				}
			}
		}
	}
	// Windows outside the image, or of the wrong size, are declined.
	data := readFile(t, progFixture)
	w, h, _ := frameSize(data)
	for _, wn := range [][4]int{{w - 1, 0, 2, 1}, {0, h, 1, 1}, {-1, 0, 1, 1}, {0, 0, 0, 1}} {
		if err := d.DecodeRGBCrop(data, make([]byte, max(wn[2]*wn[3]*3, 3)), wn[0], wn[1], wn[2], wn[3]); err == nil {
			t.Errorf("window %v of %dx%d decoded", wn, w, h)
		}
	}
	if err := d.DecodeRGBCrop(data, make([]byte, 11), 0, 0, 2, 2); err == nil {
		t.Error("a 2×2 window into 11 bytes decoded")
	}
}
