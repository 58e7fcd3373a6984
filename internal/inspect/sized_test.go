package inspect

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/loader"
)

// sizedFolder writes a folder of PNGs of the given w×h sizes (lossless, so
// the sheet's pixels can be checked exactly), sample i in class c{i%2}:
// the left half red, the right half blue, a green bottom row.
func sizedFolder(t *testing.T, sizes [][2]int) string {
	t.Helper()
	root := t.TempDir()
	for i, wh := range sizes {
		img := image.NewRGBA(image.Rect(0, 0, wh[0], wh[1]))
		for y := range wh[1] {
			for x := range wh[0] {
				c := color.RGBA{200, 10, 10, 255}
				if x >= wh[0]/2 {
					c = color.RGBA{10, 10, 200, 255}
				}
				if y == wh[1]-1 && wh[1] > 8 {
					c = color.RGBA{10, 200, 10, 255}
				}
				img.Set(x, y, c)
			}
		}
		dir := filepath.Join(root, "c"+string(rune('0'+i%2)))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := png.Encode(&b, img); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, string(rune('a'+i))+".png"), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// Samples are ordered by class, then name: c0 holds sizes 0, 2, 4, c1 1, 3.
var sheetSizes = [][2]int{{200, 100}, {30, 90}, {48, 48}, {10, 6}, {64, 128}}

// TestInspectSizedReport: a size=any source is reported as images of
// varying size, with the spread of sizes (over every sample with Verify),
// not as zero-byte samples.
func TestInspectSizedReport(t *testing.T) {
	root := sizedFolder(t, sheetSizes)
	for _, verify := range []bool{false, true} {
		r, err := Run(context.Background(), Options{Source: "folder:" + root + "?size=any", Verify: verify})
		if err != nil {
			t.Fatal(err)
		}
		want := Sizes{Measured: 5, Smallest: [2]int{10, 6}, Median: [2]int{30, 90}, Largest: [2]int{200, 100},
			MinW: 10, MedianW: 48, MaxW: 200, MinH: 6, MedianH: 90, MaxH: 128}
		if !r.Varying || r.Sizes != want || r.Verified != verify || r.Unreadable != 0 {
			t.Fatalf("verify=%v: report %+v, want sizes %+v", verify, r, want)
		}
		s := r.String()
		for _, line := range []string{"samples  5 images of varying size, 3 channels u8 hwc",
			"sizes    W×H over all samples: smallest 10×6, median 30×90, largest 200×100",
			"width 10–200 (median 48), height 6–128 (median 90)"} {
			if !strings.Contains(s, line) {
				t.Errorf("verify=%v: report lacks %q:\n%s", verify, line, s)
			}
		}
		if strings.Contains(s, "bytes each") {
			t.Errorf("report gives a sample size:\n%s", s)
		}
	}
}

// TestContactSheetThumbnails: without ops each image of varying size is
// scaled to fit its cell keeping its aspect, centred, averaged down.
func TestContactSheetThumbnails(t *testing.T) {
	src, err := loader.Open("folder:" + sizedFolder(t, sheetSizes) + "?size=any")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	// Index k is file order: c0/a (200×100), c0/c (48×48), c0/e (64×128), c1/b (30×90), c1/d (10×6).
	order := [][2]int{{200, 100}, {48, 48}, {64, 128}, {30, 90}, {10, 6}}
	img, err := ContactSheet(src, []int64{0, 1, 2, 3, 4}, SheetOptions{Scale: 1, Columns: 5})
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 5*(64+2)+2 || b.Dy() != 64+2+2 {
		t.Fatalf("sheet is %v, want five 64-pixel cells", b)
	}
	for k, wh := range order {
		th, tw := thumbSize(wh[1], wh[0], 64)
		want := [][2]int{{64, 32}, {48, 48}, {32, 64}, {21, 64}, {10, 6}}[k] // W×H
		if tw != want[0] || th != want[1] {
			t.Fatalf("image %v: thumbnail %dx%d, want %v", wh, tw, th, want)
		}
		x0, y0 := 2+k*(64+2)+(64-tw)/2, 2+(64-th)/2
		for y := -1; y <= th; y++ {
			for x := -1; x <= tw; x++ {
				got := img.RGBAAt(x0+x, y0+y)
				inside := x >= 0 && y >= 0 && x < tw && y < th
				switch {
				case !inside && (x0+x < 2+k*66 || x0+x >= 2+k*66+64 || y0+y < 2 || y0+y >= 66):
					// outside the cell: the gap
				case !inside:
					if got != background {
						t.Fatalf("image %v: (%d,%d) around the thumbnail is %v, want the background", wh, x, y, got)
					}
				case y < th-1 && x < tw/2-1 && got != (color.RGBA{200, 10, 10, 255}),
					y < th-1 && x > (tw+1)/2 && got != (color.RGBA{10, 10, 200, 255}):
					t.Fatalf("image %v: thumbnail pixel (%d,%d) is %v, want the half's colour", wh, x, y, got)
				}
			}
		}
	}
}

// TestContactSheetSizedAugmented: with ops opening with a geometric op,
// a cell is the pipeline's output for the image's own size and the
// params drawn for it, as a stream produces it.
func TestContactSheetSizedAugmented(t *testing.T) {
	root := sizedFolder(t, sheetSizes)
	src, err := loader.Open("folder:" + root + "?size=any")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ops, err := SheetOps(src.Spec(), "random_resized_crop=16,flip,normalize=imagenet,out=f32:chw")
	if err != nil {
		t.Fatal(err)
	}
	if augment.FormatOps(ops) != "random_resized_crop=16,flip=0.5" {
		t.Fatalf("sheet ops %s", augment.FormatOps(ops))
	}
	idx := []int64{0, 2, 3}
	img, err := ContactSheet(src, idx, SheetOptions{Columns: 3, Scale: 1, Ops: ops, Seed: 4, Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	pipe, _ := augment.NewPipeline(src.Spec(), append(ops, augment.Output{DType: sample.U8, Layout: sample.HWC})...)
	ss := src.(loader.SizedSource)
	scratch := make([]byte, ss.MaxPixels()*3)
	want := make([]byte, 16*16*3)
	var sc augment.Scratch
	for k, i := range idx {
		_, pix, dec, err := ss.SampleSized(i, scratch, nil)
		h, w := dec.H, dec.W
		if err != nil {
			t.Fatal(err)
		}
		if err := pipe.ApplySized(want, pix, h, w, pipe.DrawSized(4, 1, i, h, w), &sc); err != nil {
			t.Fatal(err)
		}
		x0 := 2 + k*(16+2)
		for y := range 16 {
			for x := range 16 {
				got, w := img.RGBAAt(x0+x, 2+y), want[(y*16+x)*3:]
				if got.R != w[0] || got.G != w[1] || got.B != w[2] {
					t.Fatalf("sample %d pixel (%d,%d): %v, want %v", i, x, y, got, w[:3])
				}
			}
		}
	}
}

// TestInspectSizedNeedsGeometricOps: images of varying size cannot take
// the default crop=SIZE:4,flip, nor ops without a resize or crop first;
// the error says what to pass.
func TestInspectSizedNeedsGeometricOps(t *testing.T) {
	root := sizedFolder(t, sheetSizes)
	for _, ops := range []string{"", "flip", "crop=32:4,flip", "normalize=imagenet"} {
		_, err := Run(context.Background(), Options{Source: "folder:" + root + "?size=any", Sheet: filepath.Join(t.TempDir(), "s.png"),
			Augmented: true, Ops: ops})
		if err == nil || !strings.Contains(err.Error(), "--augment") || !strings.Contains(err.Error(), "random_resized_crop=") {
			t.Errorf("ops %q: %v, want the error naming --augment and the geometric ops", ops, err)
		}
	}
	r, err := Run(context.Background(), Options{Source: "folder:" + root + "?size=any", Sheet: filepath.Join(t.TempDir(), "s.png"),
		Augmented: true, Ops: "resize=20,center_crop=16,flip"})
	if err != nil || r.SheetOps != "resize=20,center_crop=16,flip=0.5" || len(r.SheetIndices) != 5 {
		t.Fatalf("resize, center_crop: %v, %+v", err, r)
	}
}
