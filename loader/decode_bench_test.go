package loader

import (
	"image"
	"os"
	"sync/atomic"
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
	data, err := os.ReadFile("testdata/formats/img/rgb.jpg")
	if err != nil {
		b.Fatal(err)
	}
	p := newDecoderPool(6, 8, DefaultMaxImagePixels, false)
	dst := make([]byte, 6*8*3)
	b.ReportAllocs()
	for b.Loop() {
		p.decode(data, dst)
	}
}

// BenchmarkTarSample reads the real CIFAR-10 JPEGs from the tar, in
// parallel (-cpu 1,2 shows the scaling).
func BenchmarkTarSample(b *testing.B) {
	ts, err := OpenTar(cifarJPEGTar)
	if err != nil {
		b.Skip(err)
	}
	defer ts.Close()
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		scratch := make([]byte, 3072)
		for pb.Next() {
			i := next.Add(1) % ts.Len()
			if _, _, err := ts.Sample(i, scratch); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "images/s")
}
