package inspect

import (
	"context"
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/loader"
	_ "github.com/loaderd/loaderd/loader/format/all" // Source takes any format
	"github.com/loaderd/loaderd/loader/format/synthetic"
	"github.com/loaderd/loaderd/loader/imagedec"
)

const fixtures = "../../loader/testdata/formats/"

func readPNG(t *testing.T, path string) *image.NRGBA {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	n, ok := img.(*image.NRGBA)
	if !ok {
		rgba, ok := img.(*image.RGBA)
		if !ok {
			t.Fatalf("sheet decodes to %T", img)
		}
		n = &image.NRGBA{Pix: rgba.Pix, Stride: rgba.Stride, Rect: rgba.Rect} // opaque: the same bytes
	}
	return n
}

// TestInspectFolder: counts per class, sizes, verification, and a sheet
// whose cells hold the samples' pixels, scaled.
func TestInspectFolder(t *testing.T) {
	sheet := filepath.Join(t.TempDir(), "sheet.png")
	r, err := Run(context.Background(), Options{Source: "folder:" + fixtures + "folder", Sheet: sheet, Scale: 3, Columns: 2, Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []ClassCount{{"bird", 2}, {"cat", 3}}
	if r.Len != 5 || !slices.Equal(r.Classes, want) || r.SampleBytes != 144 || r.FileBytes == 0 || !r.Verified || r.Unreadable != 0 {
		t.Fatalf("report %+v", r)
	}
	if !slices.Equal(r.SheetIndices, []int64{0, 1, 2, 3, 4}) || !strings.Contains(r.String(), "  1  cat   3") {
		t.Fatalf("sheet indices %v; report:\n%s", r.SheetIndices, r)
	}
	img := readPNG(t, sheet)
	src, _ := loader.Open("folder:" + fixtures + "folder")
	defer src.Close()
	// Cell k is at column k%2, row k/2; cells are 42 wide (caption room) and
	// 6·3+28 high, with 2-pixel gaps.
	for k := range 5 {
		_, pix, err := src.Sample(int64(k), make([]byte, 144))
		if err != nil {
			t.Fatal(err)
		}
		x0, y0 := 2+(k%2)*(42+2), 2+(k/2)*(18+28+2)
		for y := range 18 {
			for x := range 24 {
				got := img.Pix[img.PixOffset(x0+x, y0+y):]
				p := pix[((y/3)*8+x/3)*3:]
				if got[0] != p[0] || got[1] != p[1] || got[2] != p[2] {
					t.Fatalf("cell %d pixel (%d,%d): %v, want %v", k, x, y, got[:3], p[:3])
				}
			}
		}
	}
}

// TestContactSheetAugmented: each cell is the fused kernel's output for
// (seed, epoch, index), crop and flip included.
func TestContactSheetAugmented(t *testing.T) {
	src := synthetic.New(100, 5)
	ops, err := SheetOps(src.Spec(), "crop=24:4:255,flip=1,normalize=cifar10,out=f32:chw")
	if err != nil {
		t.Fatal(err)
	}
	if augment.FormatOps(ops) != "crop=24:4:255,flip=1" {
		t.Fatalf("sheet ops %s, want the crop and the flip only", augment.FormatOps(ops))
	}
	idx := []int64{3, 50, 99}
	img, err := ContactSheet(src, idx, SheetOptions{Columns: 3, Scale: 1, Ops: ops, Seed: 9, Epoch: 2})
	if err != nil {
		t.Fatal(err)
	}
	pipe, _ := augment.NewPipeline(src.Spec(), append(ops, augment.Output{DType: sample.U8, Layout: sample.HWC})...)
	want := make([]byte, 24*24*3)
	for k, i := range idx {
		_, pix, _ := src.Sample(i, make([]byte, 3072))
		pipe.Apply(want, pix, pipe.Draw(9, 2, i))
		x0 := 2 + k*(24+2)
		for y := range 24 {
			for x := range 24 {
				got := img.Pix[img.PixOffset(x0+x, 2+y):]
				w := want[(y*24+x)*3:]
				if got[0] != w[0] || got[1] != w[1] || got[2] != w[2] {
					t.Fatalf("sample %d pixel (%d,%d): %v, want %v", i, x, y, got[:3], w[:3])
				}
			}
		}
	}
}

// TestInspectUnreadable: verification counts the unreadable samples and
// names them; the sheet still draws (in red where a sample fails).
func TestInspectUnreadable(t *testing.T) {
	// decoder=go: libjpeg-turbo decodes corrupt.jpg's damaged scan without complaint.
	r, err := Run(context.Background(), Options{Source: "folder:" + fixtures + "bad/images?size=8x6&decoder=go", Verify: true,
		Sheet: filepath.Join(t.TempDir(), "s.png"), Augmented: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.Unreadable != 7 || len(r.Errors) != 7 || !strings.Contains(r.String(), "verified 7 unreadable of 7") ||
		!strings.Contains(r.String(), "bomb.png") || r.SheetOps != "crop=6:4,flip=0.5" {
		t.Fatalf("report:\n%s", r)
	}
}

// TestInspectCIFARJPEGs: the real tar's classes are counted from the index,
// without decoding.
func TestInspectCIFARJPEGs(t *testing.T) {
	const path = "../../../shared/data/cifar10-train-jpg.tar"
	fi, err := os.Stat(path)
	if os.IsNotExist(err) {
		t.Skipf("skipped: %s is absent (the real CIFAR-10 JPEGs)", path)
	}
	r, err := Run(context.Background(), Options{Source: "tar:" + path, Sheet: filepath.Join(t.TempDir(), "s.png"), Augmented: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.Len != 50000 || len(r.Classes) != 10 || r.FileBytes != fi.Size() || len(r.SheetIndices) != 64 {
		t.Fatalf("report:\n%s", r)
	}
	for _, c := range r.Classes {
		if c.Count != 5000 {
			t.Fatalf("class %s: %d samples, want 5000", c.Name, c.Count)
		}
	}
}

// TestInspectDecoder: the report names the JPEG decoder decoder= chose.
func TestInspectDecoder(t *testing.T) {
	for _, dec := range []string{"go", "turbo"} {
		r, err := Run(context.Background(), Options{Source: "folder:../../loader/testdata/formats/folder?size=8x6&decoder=" + dec})
		if dec == "turbo" && err != nil && imagedec.TurboAvailable() != nil {
			continue // no libturbojpeg here: decoder=turbo is refused, rightly
		}
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(r.Decoder, dec+" (") || !strings.Contains(r.String(), "decoder  "+dec) {
			t.Errorf("decoder=%s: report says %q:\n%s", dec, r.Decoder, r)
		}
	}
}

func ExampleRun() {
	r, err := Run(context.Background(), Options{Source: "synthetic:1000"})
	if err != nil {
		panic(err)
	}
	fmt.Print(r)
	// Output:
	// source   synthetic:1000
	// fingerprint v1:640e1825584dc191b6ac3b2f0a62262b89b2258c68da1c32008fb98a486b259f
	// samples  1000 of hwc[32 32 3]/u8, 3072 bytes each (2.9 MiB decoded)
	// classes  10
	//      0  class0  99
	//      1  class1  96
	//      2  class2  119
	//      3  class3  69
	//      4  class4  93
	//      5  class5  92
	//      6  class6  116
	//      7  class7  108
	//      8  class8  102
	//      9  class9  106
}

// TestContactSheetCHW: a CHW source (CIFAR binary) is drawn as RGB.
func TestContactSheetCHW(t *testing.T) {
	src, err := loader.Open("cifar:../../loader/testdata/cifar10")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	img, err := ContactSheet(src, []int64{7}, SheetOptions{Scale: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, chw, _ := src.Sample(7, nil)
	for y := range 32 {
		for x := range 32 {
			got := img.Pix[img.PixOffset(2+x, 2+y):]
			for c := range 3 {
				if got[c] != chw[c*1024+y*32+x] {
					t.Fatalf("pixel (%d,%d) channel %d: %d, want %d", x, y, c, got[c], chw[c*1024+y*32+x])
				}
			}
		}
	}
}

// TestInspectFingerprint: the report carries and prints the fingerprint
// the daemon serves for the same FORMAT:PATH, its cache option aside.
func TestInspectFingerprint(t *testing.T) {
	for _, spec := range []string{"synthetic:64?seed=3", "folder:" + fixtures + "folder", "folder:" + fixtures + "folder?holdout=1&part=val"} {
		src, err := loader.Open(spec)
		if err != nil {
			t.Fatal(err)
		}
		want, err := loader.Fingerprint(src)
		src.Close()
		if err != nil {
			t.Fatal(err)
		}
		r, err := Run(context.Background(), Options{Source: spec + map[bool]string{false: "?", true: "&"}[strings.Contains(spec, "?")] + "cache=decoded"})
		if err != nil {
			t.Fatal(err)
		}
		if r.Fingerprint != want || !strings.Contains(r.String(), "fingerprint "+want+"\n") {
			t.Errorf("%s: fingerprint %q, want %q; report:\n%s", spec, r.Fingerprint, want, r)
		}
	}
}
