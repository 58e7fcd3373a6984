package imagedec

import (
	"archive/tar"
	"bufio"
	"bytes"
	"io"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/loader/internal/loadertest"
)

// requireCrop skips where libjpeg.so.62 is absent; CI installs it.
func requireCrop(t testing.TB) {
	t.Helper()
	requireTurbo(t)
	if _, err := loadCrop(); err != nil && os.Getenv("CI") != "" {
		t.Fatal(err)
	} else if err != nil {
		t.Skip(err)
	}
}

// cropBoxes are the boxes checked on a w×h image: corners and edges
// (where the crop's columns meet the image's), 1-pixel slivers, the whole
// image, and random ones.
func cropBoxes(rng *rand.Rand, w, h int) []augment.Box {
	b := func(x, y, bw, bh int) augment.Box {
		return augment.Box{X: int32(x), Y: int32(y), W: int32(bw), H: int32(bh)}
	}
	boxes := []augment.Box{b(0, 0, w, h), b(0, 0, 1, 1), b(w-1, h-1, 1, 1), b(0, 0, w/2, h/3),
		b(w-w/3, h-h/2, w/3, h/2), b(w/2, 0, 1, h), b(0, h/2, w, 1), b(17, 9, w-40, h-20)}
	for range 4 {
		bw, bh := 1+rng.IntN(w), 1+rng.IntN(h)
		boxes = append(boxes, b(rng.IntN(w-bw+1), rng.IntN(h-bh+1), bw, bh))
	}
	return boxes
}

// TestCropMatchesFullDecode: for every image of the large set and a dozen
// boxes each, decode-and-crop gives the full decode's pixels in the box,
// byte for byte, or declines (progressive, CMYK); it never declines a
// sequential colour or grey file.
func TestCropMatchesFullDecode(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short: crops 3,000 large images a dozen times")
	}
	requireCrop(t)
	f, err := os.Open(loadertest.LargeImagesTar(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	full := &Decoder{LibjpegOnly: true, Backend: TurboJPEG, MaxPixels: 1 << 24}
	var d Decoder
	rng := rand.New(rand.NewPCG(3, 4))
	tr := tar.NewReader(bufio.NewReaderSize(f, 1<<20))
	var took, declined, bad int
	var pix, got []byte
	for {
		hd, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !IsImageName(hd.Name) {
			continue
		}
		data, _ := io.ReadAll(tr)
		pix = grow(pix, 1<<24*3)
		h, w, _, err := full.DecodeSized(data, pix, nil)
		if err != nil {
			t.Fatalf("%s: %v", hd.Name, err)
		}
		progressive := bytes.Contains(data[:min(len(data), 2048)], []byte{0xff, 0xc2})
		for _, box := range cropBoxes(rng, w, h) {
			n := int(box.W) * int(box.H) * 3
			got = grow(got, n)
			if !d.decodeCrop(data, got[:n], w, h, box) {
				declined++
				if !progressive {
					t.Fatalf("%s: declined box %+v of a sequential %dx%d file", hd.Name, box, w, h)
				}
				continue
			}
			took++
			for y := range int(box.H) {
				row := pix[((int(box.Y)+y)*w+int(box.X))*3:][:int(box.W)*3]
				if !bytes.Equal(got[y*int(box.W)*3:][:int(box.W)*3], row) {
					if bad++; bad <= 5 {
						t.Errorf("%s: box %+v of %dx%d: row %d differs from the full decode", hd.Name, box, w, h, y)
					}
					break
				}
			}
		}
	}
	t.Logf("cropped %d boxes, declined %d (progressive)", took, declined)
	if bad > 0 || took < 20000 {
		t.Fatalf("%d of %d boxes differ; want 0 of at least 20,000", bad, took)
	}
}

// TestCropDeclinesBadInput: truncated, corrupt and non-JPEG data make
// decode-and-crop decline (libjpeg's error unwinds back to Go), and the
// decoder then crops a good image exactly as a fresh one does.
func TestCropDeclinesBadInput(t *testing.T) {
	requireCrop(t)
	good, err := os.ReadFile(fixtures + "img/video-001.q50.420.jpeg")
	if err != nil {
		t.Fatal(err)
	}
	var fresh, used Decoder
	cfg, _ := fresh.DecodeConfig(good)
	w, h := cfg.Width, cfg.Height
	box := augment.Box{X: int32(w / 4), Y: int32(h / 4), W: int32(w / 2), H: int32(h / 2)}
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
