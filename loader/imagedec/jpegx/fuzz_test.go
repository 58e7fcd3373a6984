package jpegx

import (
	"bytes"
	"errors"
	"image"
	"image/jpeg"
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecodeRGB: whatever the bytes, DecodeRGB returns nil or
// ErrUnsupported, never panics; and what it decodes does not depend on
// the images a Decoder saw before (its kept Huffman tables and planes):
// a fresh Decoder and one that has just decoded other images give the
// same bytes; and DecodeRGBCrop's window of an image it decodes holds the
// same bytes. (loader/imagedec's FuzzExactMatchesLibjpeg holds the bytes
// to libjpeg-turbo's.)
func FuzzDecodeRGB(f *testing.F) {
	var seeds [][]byte
	files, _ := filepath.Glob("../../testdata/formats/img/*.jp*g")
	prog, _ := filepath.Glob("testdata/prog*.jpg")
	for _, name := range append(files, prog...) {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, data)
	}
	for i, q := range []int{20, 75, 98} {
		m := image.NewYCbCr(image.Rect(0, 0, 19+i*13, 23), image.YCbCrSubsampleRatio420)
		for j := range m.Y {
			m.Y[j] = uint8(j * (5 + i))
		}
		for j := range m.Cb {
			m.Cb[j], m.Cr[j] = uint8(j*3), uint8(255-j)
		}
		var buf bytes.Buffer
		if err := jpeg.Encode(&buf, m, &jpeg.Options{Quality: q}); err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, buf.Bytes())
	}
	for _, s := range seeds {
		f.Add(s)
	}
	// Other tables, other sizes, and a progressive image: its coefficient
	// buffer is kept too.
	others := append(seeds[len(seeds)-3:len(seeds):len(seeds)], readFile(f, "testdata/prog420.jpg"))
	var used Decoder
	f.Fuzz(func(t *testing.T, data []byte) {
		w, h, ok := frameSize(data)
		if !ok || w*h > 1<<16 {
			return
		}
		var fresh Decoder
		a := make([]byte, w*h*3)
		errA := fresh.DecodeRGB(data, a)
		if errA != nil && !errors.Is(errA, ErrUnsupported) {
			t.Fatalf("error is not ErrUnsupported: %v", errA)
		}
		for _, s := range others {
			sw, sh, _ := frameSize(s)
			if err := used.DecodeRGB(s, make([]byte, sw*sh*3)); err != nil {
				t.Fatalf("seed: %v", err)
			}
		}
		b := make([]byte, w*h*3)
		errB := used.DecodeRGB(data, b)
		if (errA == nil) != (errB == nil) || errA == nil && !bytes.Equal(a, b) {
			t.Fatalf("a used Decoder differs from a fresh one: %v / %v", errA, errB)
		}
		if errA != nil {
			return
		}
		// A window (its place and size drawn from the data) holds the
		// whole decode's pixels there.
		x, y := int(data[len(data)/2])%w, int(data[len(data)/3])%h
		ww, wh := 1+int(data[len(data)/4])%(w-x), 1+int(data[len(data)/5])%(h-y)
		c := make([]byte, ww*wh*3)
		if err := used.DecodeRGBCrop(data, c, x, y, ww, wh); err != nil {
			t.Fatalf("window %d,%d %dx%d of a %dx%d image it decodes whole: %v", x, y, ww, wh, w, h, err)
		}
		for r := range wh {
			if !bytes.Equal(c[r*ww*3:(r+1)*ww*3], a[((y+r)*w+x)*3:][:ww*3]) {
				t.Fatalf("window %d,%d %dx%d of %dx%d: row %d differs from the whole decode", x, y, ww, wh, w, h, r)
			}
		}
	})
}

// frameSize reads the SOF0/1/2 size, for sizing the output.
func frameSize(b []byte) (w, h int, ok bool) {
	for i := 2; i+9 < len(b); {
		if b[i] != 0xff {
			return 0, 0, false
		}
		m, n := b[i+1], int(b[i+2])<<8|int(b[i+3])
		if m == 0xc0 || m == 0xc1 || m == 0xc2 {
			return int(b[i+7])<<8 | int(b[i+8]), int(b[i+5])<<8 | int(b[i+6]), true
		}
		i += 2 + n
	}
	return 0, 0, false
}

// TestGivenUpLeavesNoState: an image given up halfway (a bad Huffman
// code after some coefficients of a block) must not change the next
// image's pixels — FuzzDecodeRGB's first find.
func TestGivenUpLeavesNoState(t *testing.T) {
	m := image.NewYCbCr(image.Rect(0, 0, 32, 32), image.YCbCrSubsampleRatio420)
	for j := range m.Y {
		m.Y[j] = uint8(j * 37)
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, m, &jpeg.Options{Quality: 95}); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	var fresh Decoder
	want := make([]byte, 32*32*3)
	if err := fresh.DecodeRGB(good, want); err != nil {
		t.Fatal(err)
	}
	sos := bytes.Index(good, []byte{0xff, 0xda})
	failed := 0
	for cut := sos + 20; cut < sos+60; cut++ {
		bad := bytes.Clone(good)
		for i := cut; i < cut+8; i++ { // all ones: no valid Huffman code
			bad[i] = 0xfe
		}
		var d Decoder
		if d.DecodeRGB(bad, make([]byte, 32*32*3)) == nil {
			continue
		}
		failed++
		got := make([]byte, 32*32*3)
		if err := d.DecodeRGB(good, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("after an image given up at byte %d the next one decodes differently", cut)
		}
	}
	if failed == 0 {
		t.Fatal("no corrupted image was given up: the test tests nothing")
	}
}
