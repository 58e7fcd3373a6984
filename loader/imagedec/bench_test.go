package imagedec

import (
	"image"
	"os"
	"testing"
)

// BenchmarkToRGB converts a 32×32 4:2:0 image, CIFAR-sized.
func BenchmarkToRGB(b *testing.B) {
	m := image.NewYCbCr(image.Rect(0, 0, 32, 32), image.YCbCrSubsampleRatio420)
	for i := range m.Y {
		m.Y[i] = byte(i * 7)
	}
	dst := make([]byte, 32*32*3)
	b.SetBytes(int64(len(dst)))
	b.ReportAllocs()
	for b.Loop() {
		ycbcrToRGB(dst, m)
	}
}

// BenchmarkDecodeJPEG decodes an 8×6 JPEG through a decoder pool.
func BenchmarkDecodeJPEG(b *testing.B) {
	data, err := os.ReadFile(fixtures + "img/rgb.jpg")
	if err != nil {
		b.Fatal(err)
	}
	p := NewPool(6, 8, DefaultMaxPixels, false)
	dst := make([]byte, 6*8*3)
	b.ReportAllocs()
	for b.Loop() {
		p.Decode(data, dst)
	}
}
