package imagedec

import (
	"bytes"
	"fmt"
	"image"
	"image/jpeg"
	"testing"

	"github.com/loaderd/loaderd/loader/imagedec/jpegx"
	"github.com/loaderd/loaderd/loader/internal/loadertest"
)

// BenchmarkDecodeBySize decodes one photograph of the large-image set,
// re-encoded at sides 32 to 512 (quality 90, 4:2:0), with libjpeg-turbo
// alone and with jpegx: where its saved setup stops paying for
// its slower entropy decoding (exactMaxPixels).
//
//	go test ./loader/imagedec -run XXX -bench DecodeBySize
func BenchmarkDecodeBySize(b *testing.B) {
	requireTurbo(b)
	imgs := tarJPEGs(b, loadertest.LargeImagesTar(b), 1)
	w, h, _, _ := scanSOF(imgs[0])
	src := make([]byte, w*h*3)
	d := &Decoder{H: h, W: w, Backend: TurboJPEG, LibjpegOnly: true}
	if err := d.Decode(imgs[0], src); err != nil {
		b.Fatal(err)
	}
	for _, side := range []int{32, 64, 128, 256, 512} {
		m := image.NewRGBA(image.Rect(0, 0, side, side))
		for y := range side {
			for x := range side {
				o := ((y*h/side)*w + x*w/side) * 3
				i := m.PixOffset(x, y)
				m.Pix[i], m.Pix[i+1], m.Pix[i+2], m.Pix[i+3] = src[o], src[o+1], src[o+2], 255
			}
		}
		var buf bytes.Buffer
		if err := jpeg.Encode(&buf, m, &jpeg.Options{Quality: 90}); err != nil {
			b.Fatal(err)
		}
		for _, lib := range []bool{true, false} {
			name := map[bool]string{true: "libjpeg-turbo", false: "jpegx"}[lib]
			b.Run(fmt.Sprintf("side=%d/decoder=%s", side, name), func(b *testing.B) {
				d := &Decoder{H: side, W: side, Backend: TurboJPEG, LibjpegOnly: true}
				var jx jpegx.Decoder
				dst := make([]byte, side*side*3)
				for b.Loop() {
					var err error
					if lib {
						err = d.Decode(buf.Bytes(), dst)
					} else {
						err = jx.DecodeRGB(buf.Bytes(), dst)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
