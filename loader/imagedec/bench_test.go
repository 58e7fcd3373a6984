package imagedec

import (
	"image"
	"os"
	"testing"
	"time"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/imagedec/jpegx"
	"github.com/loaderd/loaderd/loader/internal/loadertest"
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

// BenchmarkDecodeCIFARJPEG decodes 2,000 of the CIFAR-10 JPEGs in turn
// with the TurboJPEG backend: libjpeg-turbo alone, and with
// jpegx taking the images it reproduces exactly.
//
//	go test ./loader/imagedec -run XXX -bench DecodeCIFARJPEG
func BenchmarkDecodeCIFARJPEG(b *testing.B) {
	requireTurbo(b)
	imgs := tarJPEGs(b, loadertest.CIFARJPEGTar(b), 2000)
	for _, lib := range []bool{true, false} {
		name := map[bool]string{true: "libjpeg-turbo", false: "jpegx"}[lib]
		b.Run("decoder="+name, func(b *testing.B) {
			d := &Decoder{H: 32, W: 32, Backend: TurboJPEG, LibjpegOnly: lib}
			dst := make([]byte, 32*32*3)
			b.ReportAllocs()
			start := time.Now()
			i := 0
			for b.Loop() {
				if err := d.Decode(imgs[i%len(imgs)], dst); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "images/s")
		})
	}
}

// tarJPEGs reads the first n JPEGs of a tar.
func tarJPEGs(b *testing.B, path string, n int) [][]byte {
	var out [][]byte
	eachTarImage(b, path, func(_ string, data []byte) bool {
		out = append(out, data)
		return len(out) < n
	})
	return out
}

// BenchmarkDecodeRandomCrop decodes the large set's JPEGs for
// random_resized_crop=224, sequential and progressive files apart: the
// whole image, or only the drawn box (decode-and-crop, crop.go). The box
// is torchvision's draw for each image; ms/image is the decode alone.
//
//	go test ./loader/imagedec -run XXX -bench DecodeRandomCrop
func BenchmarkDecodeRandomCrop(b *testing.B) {
	requireCrop(b)
	var seq, prog [][]byte
	for _, data := range tarJPEGs(b, loadertest.LargeImagesTar(b), 3000) {
		if isProgressive(data) {
			prog = append(prog, data)
		} else {
			seq = append(seq, data)
		}
	}
	ops, _ := augment.ParseOps("random_resized_crop=224,flip=0.5,normalize=imagenet,out=f32:chw")
	pipe, err := augment.NewPipeline(augment.Spec{C: 3, DType: sample.U8, Layout: sample.HWC}, ops...)
	if err != nil {
		b.Fatal(err)
	}
	for _, kind := range []struct {
		name string
		imgs [][]byte
	}{{"sequential", seq}, {"progressive", prog}} {
		for _, crop := range []bool{false, true} {
			name := "kind=" + kind.name + "/decode=" + map[bool]string{false: "whole", true: "crop"}[crop]
			b.Run(name, func(b *testing.B) { benchRandomCrop(b, pipe, kind.imgs, crop) })
		}
	}
}

func benchRandomCrop(b *testing.B, pipe *augment.Pipeline, imgs [][]byte, crop bool) {
	d := &Decoder{Backend: TurboJPEG, MaxPixels: AnySizeMaxPixels}
	dst := make([]byte, 3*AnySizeMaxPixels)
	s := &rrcScale{pipe: pipe, crop: crop}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s.idx = int64(i)
		h, w, err := d.SizedHeader(imgs[i%len(imgs)])
		if err == nil {
			_, err = d.DecodeSized(imgs[i%len(imgs)], dst, s.Want(h, w))
		}
		if err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/image")
}

// rrcScale draws a random resized crop's params as the loader's worker
// does (header, then want, then decode, as Source.SampleSized), and asks
// for the box when crop is set.
type rrcScale struct {
	pipe *augment.Pipeline
	idx  int64
	crop bool
}

func (s *rrcScale) Want(h, w int) loader.Want {
	prm := s.pipe.DrawSized(1, 0, s.idx, h, w)
	want := loader.Want{Scale: s.pipe.Scale(h, w, prm)}
	if s.crop {
		want.Crop, _ = s.pipe.CropBox(prm)
	}
	return want
}

// BenchmarkDecodeProgressive decodes the large set's progressive JPEGs
// (768 of the 3,000) whole into RGB: jpegx's DecodeRGB, and
// libjpeg-turbo alone. ms/image is the decode alone.
//
//	go test ./loader/imagedec -run XXX -bench DecodeProgressive -benchtime 1500x
func BenchmarkDecodeProgressive(b *testing.B) {
	requireTurbo(b)
	var imgs [][]byte
	for _, data := range tarJPEGs(b, loadertest.LargeImagesTar(b), 3000) {
		if isProgressive(data) {
			imgs = append(imgs, data)
		}
	}
	if len(imgs) == 0 {
		b.Fatal("no progressive JPEGs in the large set")
	}
	dst := make([]byte, 3*AnySizeMaxPixels)
	b.Run("decoder=jpegx", func(b *testing.B) {
		var d jpegx.Decoder
		for _, data := range imgs { // its buffers grow to the largest image
			w, h, _, _ := scanSOF(data)
			if err := d.DecodeRGB(data, dst[:w*h*3]); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			data := imgs[i%len(imgs)]
			w, h, _, _ := scanSOF(data)
			if err := d.DecodeRGB(data, dst[:w*h*3]); err != nil {
				b.Fatal(err)
			}
			i++
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/image")
	})
	b.Run("decoder=libjpeg-turbo", func(b *testing.B) {
		d := &Decoder{Backend: TurboJPEG, LibjpegOnly: true, MaxPixels: AnySizeMaxPixels}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := d.DecodeSized(imgs[i%len(imgs)], dst, loader.Want{}); err != nil {
				b.Fatal(err)
			}
			i++
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/image")
	})
}
