package imagedec

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loaderd/loaderd/loader/imagedec/jpegx"
	"github.com/loaderd/loaderd/loader/internal/loadertest"
)

// exactVsLibjpeg decodes data with jpegx and with libjpeg-turbo
// alone. It reports whether jpegx took the image, and an error when it
// did and a single byte differs, or libjpeg-turbo refused what jpegx took.
func exactVsLibjpeg(lib *Decoder, jx *jpegx.Decoder, data []byte) (bool, error) {
	w, h, _, ok := scanSOF(data)
	if !ok || w*h > 1<<22 {
		return false, nil
	}
	got := make([]byte, w*h*3)
	if err := jx.DecodeRGB(data, got); err != nil {
		if !errors.Is(err, jpegx.ErrUnsupported) {
			return false, fmt.Errorf("jpegx error wraps no ErrUnsupported: %v", err)
		}
		return false, nil
	}
	want, _, _, err := turboNative(lib, data)
	if err != nil {
		return true, fmt.Errorf("jpegx decoded an image libjpeg-turbo refuses: %v", err)
	}
	if i := firstDiff(got, want); i >= 0 {
		return true, fmt.Errorf("%dx%d: byte %d (row %d, col %d, channel %d) is %d, libjpeg-turbo's %d",
			w, h, i, i/(3*w), i/3%w, i%3, got[i], want[i])
	}
	return true, nil
}

func firstDiff(a, b []byte) int {
	if len(a) != len(b) {
		return 0
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// checkExactTar compares jpegx with libjpeg-turbo on every JPEG of a tar
// and returns how many jpegx took and how many there were.
func checkExactTar(t *testing.T, path string) (took, all int) {
	lib := &Decoder{LibjpegOnly: true}
	var jx jpegx.Decoder
	bad := 0
	eachTarImage(t, path, func(name string, data []byte) bool {
		all++
		ok, err := exactVsLibjpeg(lib, &jx, data)
		if ok {
			took++
		}
		if err != nil {
			if bad++; bad <= 5 {
				t.Errorf("%s(%s): %v", path, name, err)
			}
		}
		return true
	})
	if bad > 0 {
		t.Fatalf("%d of %d images differ", bad, all)
	}
	return took, all
}

// TestExactMatchesLibjpegCIFAR: jpegx decodes every one of the
// 50,000 CIFAR-10 JPEGs, each byte equal to libjpeg-turbo's.
func TestExactMatchesLibjpegCIFAR(t *testing.T) {
	requireTurbo(t)
	took, all := checkExactTar(t, loadertest.CIFARJPEGTar(t))
	if took != all || all != 50000 {
		t.Fatalf("jpegx took %d of %d images, want all 50,000", took, all)
	}
}

// TestExactMatchesLibjpegLarge: on the large-image set jpegx takes every
// file, sequential and progressive (768 of them; 4:4:4, 4:2:2, 4:2:0,
// greyscale), equal byte for byte.
func TestExactMatchesLibjpegLarge(t *testing.T) {
	if raceEnabled { // an exhaustive sweep on one goroutine: the run without -race has it
		t.Skip("skipped under -race: an exhaustive sweep with nothing concurrent to check (5 minutes under the detector)")
	}
	if testing.Short() {
		t.Skip("skipped in -short: decodes 3,000 large images twice")
	}
	requireTurbo(t)
	took, all := checkExactTar(t, loadertest.LargeImagesTar(t))
	t.Logf("jpegx took %d of %d", took, all)
	if all != 3000 || took != all {
		t.Fatalf("jpegx took %d of %d images: want all 3,000", took, all)
	}
}

// TestExactMatchesLibjpegGenerated: images of every size from 1×1 to
// 40×40 and a few odd large ones, colour and grey, through Go's encoder
// (4:2:0) at several qualities — edge rows and columns of the chroma
// upsampling, partial MCUs, tiny widths left to libjpeg.
func TestExactMatchesLibjpegGenerated(t *testing.T) {
	requireTurbo(t)
	lib := &Decoder{LibjpegOnly: true}
	var jx jpegx.Decoder
	rng := rand.New(rand.NewPCG(1, 2))
	took, all := 0, 0
	sizes := [][2]int{{333, 17}, {17, 333}, {129, 95}, {256, 256}}
	for w := 1; w <= 40; w++ {
		for h := 1; h <= 40; h += 1 + w%3 {
			sizes = append(sizes, [2]int{w, h})
		}
	}
	for i, s := range sizes {
		var m image.Image
		if i%5 == 4 {
			g := image.NewGray(image.Rect(0, 0, s[0], s[1]))
			for j := range g.Pix {
				g.Pix[j] = uint8(rng.IntN(256))
			}
			m = g
		} else {
			c := image.NewRGBA(image.Rect(0, 0, s[0], s[1]))
			for y := range s[1] {
				for x := range s[0] { // smooth plus noise: nonzero AC everywhere
					c.Set(x, y, color.RGBA{uint8(x * 7), uint8(y * 5), uint8(rng.IntN(256)), 255})
				}
			}
			m = c
		}
		var buf bytes.Buffer
		if err := jpeg.Encode(&buf, m, &jpeg.Options{Quality: []int{30, 75, 95, 100}[i%4]}); err != nil {
			t.Fatal(err)
		}
		all++
		ok, err := exactVsLibjpeg(lib, &jx, buf.Bytes())
		if ok {
			took++
		}
		if err != nil {
			t.Errorf("%dx%d q%d: %v", s[0], s[1], []int{30, 75, 95, 100}[i%4], err)
		}
	}
	if took < all*9/10 {
		t.Fatalf("jpegx took only %d of %d generated images", took, all)
	}
	t.Logf("jpegx took %d of %d", took, all)
}

// TestExactFixtures: the JPEG fixtures (every subsampling, progressive,
// greyscale, CMYK), and jpegx's progressive test files (4:4:4,
// 4:2:2, 4:2:0, greyscale): jpegx takes what it can, exactly, and every
// progressive one.
func TestExactFixtures(t *testing.T) {
	requireTurbo(t)
	lib := &Decoder{LibjpegOnly: true}
	var jx jpegx.Decoder
	files, _ := filepath.Glob(fixtures + "img/*.jp*g")
	prog, _ := filepath.Glob("jpegx/testdata/prog*.jpg")
	if len(prog) != 4 {
		t.Fatalf("%d progressive files in jpegx/testdata, want 4", len(prog))
	}
	for _, f := range append(files, prog...) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ok, err := exactVsLibjpeg(lib, &jx, data)
		if err != nil {
			t.Errorf("%s: %v", f, err)
		}
		if !ok && strings.Contains(filepath.Base(f), "prog") {
			t.Errorf("%s: jpegx left a progressive file to libjpeg", f)
		}
		t.Logf("%s: jpegx took it: %v", filepath.Base(f), ok)
	}
}

// FuzzExactMatchesLibjpeg: whatever the bytes, jpegx never panics, and
// when it takes an image, libjpeg-turbo decodes it too, to the same
// bytes — a malformed file must fall back, never decode differently.
func FuzzExactMatchesLibjpeg(f *testing.F) {
	fuzzSeeds(f)
	prog, _ := filepath.Glob("jpegx/testdata/prog*.jpg")
	for _, name := range prog {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, q := range []int{50, 90} {
		var buf bytes.Buffer
		m := image.NewYCbCr(image.Rect(0, 0, 37, 21), image.YCbCrSubsampleRatio420)
		for i := range m.Y {
			m.Y[i] = uint8(i * 13)
		}
		if err := jpeg.Encode(&buf, m, &jpeg.Options{Quality: q}); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
	}
	lib := &Decoder{LibjpegOnly: true}
	var jx jpegx.Decoder
	f.Fuzz(func(t *testing.T, data []byte) {
		if TurboAvailable() != nil {
			t.Skip()
		}
		if w, h, _, ok := scanSOF(data); ok && w*h > 1<<16 {
			return // a garbage stream at 2048×2048 takes libjpeg a second
		}
		if _, err := exactVsLibjpeg(lib, &jx, data); err != nil {
			t.Fatal(err)
		}
	})
}
