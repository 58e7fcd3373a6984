package imagedec

import (
	"bytes"
	"image"
	"image/jpeg"
	"math/rand/v2"
	"os"
	"runtime"
	"testing"
	"unsafe"

	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/internal/loadertest"
)

// requireCrop skips where libjpeg.so.62 is absent, or fails where
// LOADERD_REQUIRE_TURBO=1 (scripts/test.sh installs both libraries).
func requireCrop(t testing.TB) {
	t.Helper()
	requireTurbo(t)
	if err := CropAvailable(); err != nil {
		if os.Getenv("LOADERD_REQUIRE_TURBO") == "1" {
			t.Fatalf("LOADERD_REQUIRE_TURBO=1: %v", err)
		}
		t.Skipf("skipped: %v", err)
	}
}

// cropBoxes are the boxes checked on a w×h image: corners and edges
// (where the crop's columns meet the image's), 1-pixel slivers, the whole
// image, and random ones.
func cropBoxes(rng *rand.Rand, w, h int) []sample.Box {
	b := func(x, y, bw, bh int) sample.Box {
		return sample.Box{X: int32(x), Y: int32(y), W: int32(bw), H: int32(bh)}
	}
	boxes := []sample.Box{b(0, 0, w, h), b(0, 0, 1, 1), b(w-1, h-1, 1, 1), b(0, 0, w/2, h/3),
		b(w-w/3, h-h/2, w/3, h/2), b(w/2, 0, 1, h), b(0, h/2, w, 1), b(17, 9, w-40, h-20)}
	for range 4 {
		bw, bh := 1+rng.IntN(w), 1+rng.IntN(h)
		boxes = append(boxes, b(rng.IntN(w-bw+1), rng.IntN(h-bh+1), bw, bh))
	}
	return boxes
}

// TestCropMatchesFullDecode: for every image of the large set and a dozen
// boxes each, decode-and-crop gives libjpeg-turbo's whole decode's pixels
// in the box, byte for byte: libjpeg's for the sequential files, jpegx's
// for the progressive ones. It declines none of them (only CMYK, files
// libjpeg or jpegx would warn on, and the like fall back).
func TestCropMatchesFullDecode(t *testing.T) {
	if raceEnabled { // an exhaustive sweep on one goroutine: the run without -race has it
		t.Skip("skipped under -race: an exhaustive sweep with nothing concurrent to check (5 minutes under the detector)")
	}
	if testing.Short() {
		t.Skip("skipped in -short: crops 3,000 large images a dozen times")
	}
	requireCrop(t)
	full := &Decoder{LibjpegOnly: true, Backend: TurboJPEG, MaxPixels: 1 << 24}
	var d Decoder
	rng := rand.New(rand.NewPCG(3, 4))
	var took, bad int
	pix := make([]byte, 1<<24*3)
	var got []byte
	eachTarImage(t, loadertest.LargeImagesTar(t), func(name string, data []byte) bool {
		dec, err := full.DecodeSized(data, pix, loader.Want{})
		h, w := dec.H, dec.W
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		progressive := isProgressive(data)
		for _, box := range cropBoxes(rng, w, h) {
			n := int(box.W) * int(box.H) * 3
			got = grow(got, n)
			if !d.decodeCrop(data, got[:n], w, h, box) {
				t.Fatalf("%s: declined box %+v of a %dx%d file (progressive: %v)", name, box, w, h, progressive)
			}
			took++
			for y := range int(box.H) {
				row := pix[((int(box.Y)+y)*w+int(box.X))*3:][:int(box.W)*3]
				if !bytes.Equal(got[y*int(box.W)*3:][:int(box.W)*3], row) {
					if bad++; bad <= 5 {
						t.Errorf("%s: box %+v of %dx%d: row %d differs from the full decode", name, box, w, h, y)
					}
					break
				}
			}
		}
		return true
	})
	t.Logf("cropped %d boxes", took)
	if bad > 0 || took != 3000*12 {
		t.Fatalf("%d of %d boxes differ; want 0 of 36,000", bad, took)
	}
}

// TestCropDeclinesBadInput: truncated, corrupt and non-JPEG data make
// decode-and-crop decline (libjpeg's error unwinds back to Go), and the
// decoder then crops a good image exactly as a fresh one does.
func TestCropDeclinesBadInput(t *testing.T) {
	requireCrop(t)
	good, err := os.ReadFile(fixtures + "img/shapes.q50.420.jpeg")
	if err != nil {
		t.Fatal(err)
	}
	var fresh, used Decoder
	cfg, _ := fresh.DecodeConfig(good)
	w, h := cfg.Width, cfg.Height
	box := sample.Box{X: int32(w / 4), Y: int32(h / 4), W: int32(w / 2), H: int32(h / 2)}
	want := make([]byte, int(box.W)*int(box.H)*3)
	if !fresh.decodeCrop(good, want, w, h, box) {
		t.Fatal("declined the good image")
	}
	flipped := bytes.Clone(good)
	for i := len(flipped) / 2; i < len(flipped)-2; i += 7 {
		flipped[i] ^= 0x5a
	}
	for name, data := range map[string][]byte{
		"empty": nil, "not jpeg": []byte("not a jpeg at all"), "header only": good[:200],
		"cut": good[:len(good)/2], "flipped": flipped, "soi": {0xff, 0xd8},
	} {
		got := make([]byte, len(want))
		if used.decodeCrop(data, got, w, h, box) && name != "flipped" {
			t.Errorf("%s: decoded", name)
		}
	}
	got := make([]byte, len(want))
	if !used.decodeCrop(good, got, w, h, box) || !bytes.Equal(got, want) {
		t.Fatal("after bad input the decoder crops the good image differently")
	}
	if raceEnabled {
		return // the race detector's instrumentation allocates
	}
	if a := testing.AllocsPerRun(20, func() { used.decodeCrop(good, got, w, h, box) }); a != 0 {
		t.Errorf("decode-and-crop allocates %.1f times per image", a)
	}
}

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

// FuzzCropMatchesFull: whatever the bytes and the box, decode-and-crop
// never panics, and when it takes a file that the whole-image decode also
// takes, its pixels are the whole decode's in the box. (It may take a
// file whose damage lies below the box, which the whole decode refuses.)
func FuzzCropMatchesFull(f *testing.F) {
	requireCrop(f)
	for _, n := range []string{"shapes.q50.420.jpeg", "shapes.q50.422.jpeg", "shapes.q50.444.jpeg", "gray.jpg", "shapes.progressive.jpeg"} {
		data, err := os.ReadFile(fixtures + "img/" + n)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, uint16(3), uint16(5), uint16(40), uint16(30))
		f.Add(data, uint16(0), uint16(0), uint16(1000), uint16(1000))
	}
	full := &Decoder{Backend: TurboJPEG, LibjpegOnly: true, MaxPixels: 1 << 20}
	var d Decoder
	pix := make([]byte, 3<<20)
	f.Fuzz(func(t *testing.T, data []byte, x, y, bw, bh uint16) {
		cfg, err := d.DecodeConfig(data)
		if err != nil || cfg.Width*cfg.Height > 1<<20 || cfg.Width <= 0 || cfg.Height <= 0 {
			return
		}
		w, h := cfg.Width, cfg.Height
		bx, by := int(x)%w, int(y)%h
		box := sample.Box{X: int32(bx), Y: int32(by), W: int32(1 + int(bw)%(w-bx)), H: int32(1 + int(bh)%(h-by))}
		got := make([]byte, int(box.W)*int(box.H)*3)
		if !d.decodeCrop(data, got, w, h, box) {
			return
		}
		dec, err := full.DecodeSized(data, pix, loader.Want{})
		fh, fw := dec.H, dec.W
		if err != nil {
			return
		}
		if fh != h || fw != w {
			t.Fatalf("crop took a %dx%d image the whole decode sees as %dx%d", w, h, fw, fh)
		}
		for r := range int(box.H) {
			want := pix[((by+r)*w+bx)*3:][:int(box.W)*3]
			if !bytes.Equal(got[r*int(box.W)*3:][:int(box.W)*3], want) {
				t.Fatalf("box %+v of %dx%d: row %d differs from the whole decode", box, w, h, r)
			}
		}
	})
}

// TestTablesOfEarlierImagesIgnored: a JPEG without its own Huffman tables
// (a Motion-JPEG frame) decodes with libjpeg's standard ones whatever the
// pooled decoder decoded before, as PIL's fresh decompressor per image
// does; libjpeg would otherwise keep the previous image's tables.
func TestTablesOfEarlierImagesIgnored(t *testing.T) {
	requireCrop(t)
	m := image.NewRGBA(image.Rect(0, 0, 320, 240))
	for i := range m.Pix {
		m.Pix[i] = byte(i*7 + i/1280)
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, m, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	// Go's encoder writes the standard tables; drop them.
	enc, stripped := b.Bytes(), []byte{0xff, 0xd8}
	for i := 2; i < len(enc); {
		n := 2 + (int(enc[i+2])<<8 | int(enc[i+3]))
		if enc[i+1] == 0xda {
			stripped = append(stripped, enc[i:]...)
			break
		}
		if enc[i+1] != 0xc4 {
			stripped = append(stripped, enc[i:i+n]...)
		}
		i += n
	}
	if ownTables(stripped) || !ownTables(enc) {
		t.Fatalf("ownTables: %v for the stripped file, %v for the whole", ownTables(stripped), ownTables(enc))
	}
	want := make([]byte, 320*240*3)
	if _, err := (&Decoder{Backend: TurboJPEG}).DecodeSized(stripped, want, loader.Want{}); err != nil {
		t.Fatalf("a fresh decoder: %v", err)
	}
	other, err := os.ReadFile(fixtures + "img/shapes.progressive.jpeg") // libjpeg's optimised tables
	if err != nil {
		t.Fatal(err)
	}
	d := &Decoder{Backend: TurboJPEG}
	got := make([]byte, len(want))
	box := sample.Box{X: 40, Y: 30, W: 200, H: 150}
	for _, ask := range []loader.Want{{}, {Scale: 1, Crop: box}} {
		if _, err := d.DecodeSized(other, got, loader.Want{}); err != nil {
			t.Fatal(err)
		}
		dec, err := d.DecodeSized(stripped, got, ask)
		if err != nil {
			t.Fatal(err)
		}
		if !dec.Whole() {
			t.Fatalf("decode-and-crop took a file without its own tables: %+v", dec)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("want %+v: after another image the pixels differ from a fresh decoder's", ask)
		}
	}
}

// TestCropHandlesCollected: decoders dropped with their libjpeg handles
// (as sync.Pool drops them at a GC) are destroyed by their cleanups while
// others decode; libjpeg's memory outlives the handle until then.
func TestCropHandlesCollected(t *testing.T) {
	requireCrop(t)
	good, err := os.ReadFile(fixtures + "img/shapes.q50.420.jpeg")
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := new(Decoder).DecodeConfig(good)
	box := sample.Box{X: 5, Y: 5, W: int32(cfg.Width / 2), H: int32(cfg.Height / 2)}
	got := make([]byte, int(box.W)*int(box.H)*3)
	for i := range 400 {
		d := new(Decoder)
		if !d.decodeCrop(good, got, cfg.Width, cfg.Height, box) {
			t.Fatal("declined")
		}
		if i%20 == 0 {
			runtime.GC()
		}
	}
}

// TestCropErrorUnwinds: a libjpeg error (here "Unsupported JPEG data
// precision 12", raised inside jpeg_read_header) reaches Go through the
// panicking error_exit callback as a failed call, not an exit(); the
// handle then decodes the next image.
func TestCropErrorUnwinds(t *testing.T) {
	requireCrop(t)
	good, err := os.ReadFile(fixtures + "img/shapes.q50.420.jpeg")
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(good)
	sof := bytes.Index(bad, []byte{0xff, 0xc0})
	if sof < 0 {
		t.Fatal("no SOF0")
	}
	bad[sof+4] = 12 // sample precision
	if !ownTables(bad) {
		t.Fatal("the edited file no longer passes ownTables: the test would not reach libjpeg")
	}
	var d Decoder
	cfg, _ := d.DecodeConfig(good)
	w, h := cfg.Width, cfg.Height
	box := sample.Box{X: 3, Y: 3, W: int32(w - 6), H: int32(h - 6)}
	got := make([]byte, int(box.W)*int(box.H)*3)
	if !d.decodeCrop(good, got, w, h, box) {
		t.Fatal("declined the good image")
	}
	c := d.crop
	c.call(c.lib.memSrc, c.ptr(), uintptr(unsafe.Pointer(&bad[0])), uintptr(len(bad)))
	if _, ok := c.call(c.lib.readHeader, c.ptr(), 1); ok {
		t.Fatal("jpeg_read_header returned on a 12-bit file")
	}
	if d.decodeCrop(bad, got, w, h, box) {
		t.Fatal("decoded a 12-bit file")
	}
	want := make([]byte, len(got))
	if !new(Decoder).decodeCrop(good, want, w, h, box) || !d.decodeCrop(good, got, w, h, box) || !bytes.Equal(got, want) {
		t.Fatal("after the error the handle decodes differently from a fresh one")
	}
}
