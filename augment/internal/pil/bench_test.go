package pil

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/loaderd/loaderd/client/sample"
)

// BenchmarkOps times one operation of each family on a 224×224 RGB image.
func BenchmarkOps(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	const size = 224
	src := randomImage(r, size, size, 3)
	dst := newImage(size, size, 3)
	gray := newImage(size, size, 1)
	scratch := make([]float32, BlurScratch(src))
	fill := []uint8{128}
	ops := []struct {
		name string
		f    func()
	}{
		{"brightness", func() { Brightness(dst, src, 1.4) }},
		{"contrast", func() { Contrast(dst, src, 1.4) }},
		{"saturation", func() { Saturation(dst, src, 1.4) }},
		{"sharpness", func() { Sharpness(dst, src, 1.4) }},
		{"hue", func() { Hue(dst, src, 0.2) }},
		{"grayscale", func() { Grayscale(gray, src) }},
		{"posterize", func() { Posterize(dst, src, 4) }},
		{"solarize", func() { Solarize(dst, src, 128) }},
		{"autocontrast", func() { AutoContrast(dst, src) }},
		{"equalize", func() { Equalize(dst, src) }},
		{"invert", func() { Invert(dst, src) }},
		{"rotate", func() { Rotate(dst, src, 17, fill) }},
		{"shear", func() { ApplyOp(dst, src, sample.OpShearX, 0.3, fill) }},
		{"translate", func() { ApplyOp(dst, src, sample.OpTranslateX, 30, fill) }},
		{"gaussian_blur", func() { GaussianBlur(dst, src, [2]int{9, 9}, [2]float64{2, 2}, scratch) }},
	}
	for _, op := range ops {
		b.Run(fmt.Sprintf("op=%s/size=%d", op.name, size), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(src.Pix)))
			for b.Loop() {
				op.f()
			}
		})
	}
}
