package imagedec

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	_ "image/gif" // the standard decoders, for reference
	"image/jpeg"
	_ "image/png"
	"os"
	"path/filepath"
	"testing"

	_ "golang.org/x/image/bmp"
	_ "golang.org/x/image/tiff"
	_ "golang.org/x/image/webp"

	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/internal/loadertest"
)

// The fixtures are shared with the formats' tests.
const fixtures = "../testdata/formats/"

// randomImages returns one image of every pixel type toRGB has a path
// for, filled with seeded noise, as sub-images at an odd offset so that
// strides and origins are exercised.
func randomImages() map[string]image.Image {
	r := image.Rect(0, 0, 13, 9)
	noise := func(b []byte, seed uint32) {
		x := seed | 1
		for i := range b {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			b[i] = byte(x)
		}
	}
	sub := func(m image.Image) image.Image {
		return m.(interface {
			SubImage(image.Rectangle) image.Image
		}).SubImage(image.Rect(3, 1, 12, 8))
	}
	out := map[string]image.Image{}
	for _, ratio := range []image.YCbCrSubsampleRatio{image.YCbCrSubsampleRatio444, image.YCbCrSubsampleRatio422,
		image.YCbCrSubsampleRatio420, image.YCbCrSubsampleRatio440, image.YCbCrSubsampleRatio411, image.YCbCrSubsampleRatio410} {
		m := image.NewYCbCr(r, ratio)
		noise(m.Y, 1)
		noise(m.Cb, 2)
		noise(m.Cr, 3)
		out["ycbcr-"+ratio.String()] = m
		out["ycbcr-sub-"+ratio.String()] = sub(m)
		out["ycbcr-even-"+ratio.String()] = m.SubImage(image.Rect(2, 2, 11, 7))
	}
	a := image.NewNYCbCrA(r, image.YCbCrSubsampleRatio420)
	noise(a.Y, 4)
	noise(a.Cb, 5)
	noise(a.Cr, 6)
	noise(a.A, 7)
	out["nycbcra"] = sub(a)
	g := image.NewGray(r)
	noise(g.Pix, 8)
	out["gray"] = sub(g)
	rgba := image.NewRGBA(r)
	noise(rgba.Pix, 9)
	for i := 3; i < len(rgba.Pix); i += 4 { // premultiplied: colour ≤ alpha
		switch i % 3 {
		case 0:
			rgba.Pix[i] = 255
		case 1:
			rgba.Pix[i] = 0
		}
		for c := 1; c <= 3; c++ {
			rgba.Pix[i-c] = min(rgba.Pix[i-c], rgba.Pix[i])
		}
	}
	out["rgba"] = sub(rgba)
	n := image.NewNRGBA(r)
	noise(n.Pix, 10)
	out["nrgba"] = sub(n)
	p := image.NewPaletted(r, color.Palette{color.NRGBA{1, 2, 3, 4}, color.RGBA{10, 20, 30, 40}, color.Gray{77}, color.NRGBA{200, 100, 50, 255}})
	noise(p.Pix, 11)
	for i := range p.Pix {
		p.Pix[i] %= 4
	}
	out["paletted"] = sub(p)
	c := image.NewCMYK(r)
	noise(c.Pix, 12)
	out["cmyk"] = sub(c)
	g16 := image.NewGray16(r)
	noise(g16.Pix, 13)
	out["gray16"] = sub(g16)
	r64 := image.NewRGBA64(r)
	noise(r64.Pix, 14)
	for i := 0; i < len(r64.Pix); i += 8 { // premultiplied: colour ≤ alpha
		for c := 0; c < 6; c += 2 {
			if r64.Pix[i+c] > r64.Pix[i+6] {
				r64.Pix[i+c] = r64.Pix[i+6]
			}
		}
	}
	out["rgba64"] = sub(r64)
	n64 := image.NewNRGBA64(r)
	noise(n64.Pix, 15)
	out["nrgba64"] = sub(n64)
	return out
}

func TestToRGBFastPaths(t *testing.T) {
	for name, img := range randomImages() {
		want := loadertest.WantRGB(img)
		got := make([]byte, len(want))
		if err := toRGB(got, img); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(got, want) {
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("%s (%T): byte %d (pixel %d) is %d, want %d", name, img, i, i/3, got[i], want[i])
				}
			}
		}
	}
	if err := toRGB(make([]byte, 3), image.NewAlpha(image.Rect(0, 0, 1, 1))); !errors.Is(err, ErrFormat) {
		t.Fatalf("unsupported pixel type: %v, want ErrFormat", err)
	}
}

// TestDecodeFiles decodes one file of every format and pixel type and
// compares with the standard decoders through the reference conversion.
func TestDecodeFiles(t *testing.T) {
	names, _ := filepath.Glob(fixtures + "img/*")
	kinds := map[string]bool{}
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		ref, _, err := image.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: reference decoder: %v", name, err)
		}
		kinds[fmt.Sprintf("%T", ref)] = true
		b := ref.Bounds()
		d := &Decoder{H: b.Dy(), W: b.Dx()}
		got := make([]byte, b.Dx()*b.Dy()*3)
		if err := d.Decode(data, got); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(got, loadertest.WantRGB(ref)) {
			t.Errorf("%s (%T): pixels differ from the reference", name, ref)
		}
	}
	for _, k := range []string{"*image.YCbCr", "*image.Gray", "*image.RGBA", "*image.NRGBA", "*image.Paletted",
		"*image.CMYK", "*image.Gray16", "*image.NRGBA64", "*image.NYCbCrA"} {
		if !kinds[k] {
			t.Errorf("no fixture decodes to %s (have %v)", k, kinds)
		}
	}
}

// goJPEGAllocs bounds the allocations of one JPEG decode with the GoJPEG
// backend: all of them image/jpeg's own. Measured with Go 1.26 on
// rgb.jpg (8×6, YCbCr), 6 allocations and ~14 KiB per decode: the
// decoder state image/jpeg allocates for every image (13.3 KiB), the
// YCbCr image (its struct, its planes, the sub-image header of its
// bounds) and two error values its Huffman reader makes on every image.
// The header check adds nothing: scanSOF reads it (Decoder.header), where
// image/jpeg's DecodeConfig would allocate a second decoder state. The
// TurboJPEG backend allocates nothing per image (TestTurboAllocs).
const goJPEGAllocs = 6

// TestDecodeAllocs: a JPEG decoded by a Decoder, and through a source's
// decoder pool once it is warm, allocates what image/jpeg.Decode
// allocates for the image itself and nothing more: goJPEGAllocs at most.
func TestDecodeAllocs(t *testing.T) {
	data, err := os.ReadFile(fixtures + "img/rgb.jpg")
	if err != nil {
		t.Fatal(err)
	}
	var br bytes.Reader
	std := allocsPerRun(100, func() {
		br.Reset(data)
		if _, err := jpeg.Decode(&br); err != nil {
			t.Fatal(err)
		}
	})
	scratch := make([]byte, 6*8*3)
	check := func(what string, decode func() error) {
		t.Helper()
		if err := decode(); err != nil {
			t.Fatal(err)
		}
		n := allocsPerRun(100, func() { decode() })
		t.Logf("%s: %v allocations per JPEG decode; image/jpeg.Decode alone %v", what, n, std)
		if n > std {
			t.Errorf("%s: %v allocations per JPEG decode, image/jpeg.Decode alone makes %v", what, n, std)
		}
		if n > goJPEGAllocs {
			t.Errorf("%s: %v allocations per JPEG decode, want at most %d (Go 1.26's image/jpeg; see goJPEGAllocs)", what, n, goJPEGAllocs)
		}
	}
	d := &Decoder{H: 6, W: 8}
	check("Decoder", func() error { return d.Decode(data, scratch) })
	if raceEnabled {
		return // sync.Pool drops decoders under the race detector
	}
	p := NewPool(6, 8, DefaultMaxPixels, false)
	check("Pool", func() error { _, err := p.Decode(data, scratch); return err })
}

// sentinel reports whether err wraps one of the decoders' sentinels.
func sentinel(err error) bool {
	for _, s := range []error{loader.ErrCorrupt, loader.ErrTruncated, ErrFormat, ErrSize, ErrTooLarge} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

func fuzzSeeds(f *testing.F) {
	names, _ := filepath.Glob(fixtures + "img/*")
	bad, _ := filepath.Glob(fixtures + "bad/images/c/*")
	for _, name := range append(names, bad...) {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
}

// FuzzImageDecodeConfig: any input gives a header or an error wrapping a
// sentinel, never a panic; a header agrees with the standard decoders'.
func FuzzImageDecodeConfig(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		var d Decoder
		cfg, err := d.DecodeConfig(data)
		if err != nil {
			if !sentinel(err) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		ref, format, err := image.DecodeConfig(bytes.NewReader(data))
		if err != nil || format != cfg.Format || ref.Width != cfg.Width || ref.Height != cfg.Height {
			t.Fatalf("config %+v; standard decoders: %s %dx%d, %v", cfg, format, ref.Width, ref.Height, err)
		}
	})
}

// FuzzImageDecode is differential: on any input, Decode at the size the
// header declares succeeds exactly when the standard decoder does, with
// the same pixels; every error wraps a sentinel.
func FuzzImageDecode(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		var d Decoder
		cfg, err := d.DecodeConfig(data)
		if err != nil || cfg.Width*cfg.Height > 1<<16 {
			return // DecodeConfig is FuzzImageDecodeConfig's; keep runs fast
		}
		d.H, d.W = cfg.Height, cfg.Width
		got := make([]byte, d.H*d.W*3)
		err = d.Decode(data, got)
		if err != nil && !sentinel(err) {
			t.Fatalf("error wraps no sentinel: %v", err)
		}
		ref, _, refErr := image.Decode(bytes.NewReader(data))
		if refErr == nil && (ref.Bounds().Dx() != d.W || ref.Bounds().Dy() != d.H) {
			refErr = ErrSize // a GIF frame smaller than its screen
		}
		if (err == nil) != (refErr == nil) {
			t.Fatalf("error %v; standard decoder: %v", err, refErr)
		}
		if err == nil && !bytes.Equal(got, loadertest.WantRGB(ref)) {
			t.Fatal("pixels differ from the standard decoder's")
		}
	})
}
