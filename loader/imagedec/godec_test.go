package imagedec

import (
	"bytes"
	"errors"
	"image/jpeg"
	"os"
	"runtime"
	"testing"

	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/internal/loadertest"
)

// TestGoErrors: with the GoJPEG backend (image/jpeg) damaged input is an
// error wrapping the right sentinel, and an oversized or wrong-sized
// header is refused before decoding, whether scanSOF reads the header or
// image/jpeg's DecodeConfig does.
func TestGoErrors(t *testing.T) {
	data, err := os.ReadFile(fixtures + "img/shapes.q50.420.jpeg")
	if err != nil {
		t.Fatal(err)
	}
	h, w, _ := Size(data, DefaultMaxPixels)
	sof := bytes.Index(data, []byte{0xff, 0xc0})
	if sof < 0 {
		t.Fatal("no SOF0")
	}
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(data)) }
	// A stray byte before the frame header: image/jpeg skips it, scanSOF
	// leaves the header to image/jpeg's DecodeConfig.
	stray := edit(func(b []byte) []byte { return append(append(b[:sof:sof], 0x00), data[sof:]...) })
	if _, _, _, ok := scanSOF(stray); ok {
		t.Fatal("scanSOF read a header with a stray byte")
	}
	bomb := loadertest.Fixture(t, "bad/images/c/bomb.jpg")
	d := &Decoder{H: h, W: w}
	dst := make([]byte, h*w*3)
	for _, c := range []struct {
		name string
		data []byte
		max  int64
		want error
	}{
		{"truncated", data[:len(data)/2], 0, loader.ErrTruncated},
		{"header only", data[:200], 0, loader.ErrTruncated},
		{"cut in the frame header", data[:sof+8], 0, loader.ErrTruncated},
		{"garbage after SOI", append(append([]byte{0xff, 0xd8, 0xff}, bytes.Repeat([]byte{0x55}, 100)...), 0xff, 0xd9), 0, loader.ErrCorrupt},
		{"damaged scan", loadertest.Fixture(t, "bad/images/c/corrupt.jpg"), 0, loader.ErrCorrupt},
		{"cut in the tables", loadertest.Fixture(t, "bad/images/c/truncated.jpg"), 0, loader.ErrTruncated},
		{"arithmetic coding (SOF9)", edit(func(b []byte) []byte { b[sof+1] = 0xc9; return b }), 0, loader.ErrCorrupt},
		{"sampling factor 0", edit(func(b []byte) []byte { b[sof+11] = 0x00; return b }), 0, loader.ErrCorrupt},
		{"too many pixels", data, int64(h*w) - 1, ErrTooLarge},
		{"too many pixels, stray byte", stray, int64(h*w) - 1, ErrTooLarge},
		{"bomb", bomb, 0, ErrTooLarge},
	} {
		d.MaxPixels, d.Resize = c.max, true
		if err := d.Decode(c.data, dst); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		if _, err := d.DecodeSized(c.data, dst, loader.Want{}); !errors.Is(err, c.want) {
			t.Errorf("%s: DecodeSized: %v, want %v", c.name, err, c.want)
		}
	}
	d.MaxPixels, d.Resize = 0, false
	if err := d.Decode(stray, dst); err != nil {
		t.Errorf("stray byte before the frame header: %v (image/jpeg takes it)", err)
	}
	d.W++
	if err := d.Decode(data, make([]byte, h*d.W*3)); !errors.Is(err, ErrSize) {
		t.Errorf("wrong size: %v, want ErrSize", err)
	}

	// Refusing the bomb (65000×65000) costs its error message, not a
	// decoder: image/jpeg's state alone is 13 KiB.
	d.W = w
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 100 {
		d.Decode(bomb, dst)
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / 100; per > 1024 {
		t.Errorf("refusing an oversized JPEG allocated %d bytes", per)
	}
}

// FuzzGoDecode is differential on the GoJPEG path's own header read:
// wherever scanSOF reads a frame header, Decode at that size succeeds
// exactly when image/jpeg.Decode does, the image it decodes has that
// size, and the pixels are its; a header over MaxPixels is refused. (Other
// inputs go through image/jpeg's DecodeConfig: FuzzImageDecode.)
func FuzzGoDecode(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		w, h, _, ok := scanSOF(data)
		if !ok {
			return
		}
		d := &Decoder{H: h, W: w, MaxPixels: 1 << 16}
		dst := make([]byte, 3)
		if w*h > 1<<16 {
			if err := d.Decode(data, dst); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("%dx%d over %d pixels: %v, want ErrTooLarge", w, h, d.MaxPixels, err)
			}
			return
		}
		dst = make([]byte, w*h*3)
		err := d.Decode(data, dst)
		if err != nil && !sentinel(err) {
			t.Fatalf("error wraps no sentinel: %v", err)
		}
		ref, refErr := jpeg.Decode(bytes.NewReader(data))
		if (err == nil) != (refErr == nil) {
			t.Fatalf("error %v; image/jpeg: %v", err, refErr)
		}
		if refErr != nil {
			return
		}
		if b := ref.Bounds(); b.Dx() != w || b.Dy() != h {
			t.Fatalf("scanSOF read %dx%d, image/jpeg decoded %dx%d", w, h, b.Dx(), b.Dy())
		}
		if !bytes.Equal(dst, loadertest.WantRGB(ref)) {
			t.Fatal("pixels differ from image/jpeg's")
		}
	})
}
