package parquet

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/internal/convert"
	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/imagedec"
	"github.com/loaderd/loaderd/loader/internal/loadertest"
)

// askScale asks the decoder for a fixed DCT scale.
type askScale int

func (s askScale) Want(h, w int) loader.Want { return loader.Want{Scale: int(s)} }

// TestParquetSized: a Hugging Face style Parquet file of JPEGs of varying
// sizes opens with size=any as a loader.SizedSource that reads exactly
// what the tar format reads from the same JPEGs: labels, sizes, DCT
// scales, pixels, and the batches of a resizing stream.
func TestParquetSized(t *testing.T) {
	imgs := loadertest.VaryingJPEGs(t)
	dir := t.TempDir()
	loadertest.WriteVaryingTar(t, filepath.Join(dir, "v.tar"), imgs)
	path := filepath.Join(dir, "v.parquet")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := convert.NewParquetWriter(f, "image", "label", []string{"c0", "c1", "c2"}, 4) // two row groups
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range imgs {
		if err := w.Write(b, fmt.Sprintf("%02d.jpg", i), int64(loadertest.VaryingSet[i].Label)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	backends := []string{"go"}
	if imagedec.TurboAvailable() == nil {
		backends = append(backends, "turbo")
	}
	for _, be := range backends {
		t.Run(be, func(t *testing.T) {
			opts := "?size=any&maxpixels=100000&decoder=" + be
			src, err := loader.Open("parquet:" + path + opts)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			ref, err := loader.Open("tar:" + filepath.Join(dir, "v.tar") + opts)
			if err != nil {
				t.Fatal(err)
			}
			defer ref.Close()
			ss, ok := src.(loader.SizedSource)
			if want := (augment.Spec{C: 3, DType: sample.U8, Layout: sample.HWC}); !ok || src.Spec() != want || ss.MaxPixels() != 100000 {
				t.Fatalf("%T: spec %v, want a SizedSource of %v", src, src.Spec(), want)
			}
			a, b := make([]byte, 100000*3), make([]byte, 100000*3)
			for i := range src.Len() {
				for _, d := range []int{1, 2} {
					l1, p1, x1, err1 := ss.SampleSized(i, a, askScale(d))
					l2, p2, x2, err2 := ref.(loader.SizedSource).SampleSized(i, b, askScale(d))
					h1, w1, d1, h2, w2, d2 := x1.H, x1.W, x1.Scale, x2.H, x2.W, x2.Scale
					if err1 != nil || err2 != nil || l1 != l2 || h1 != h2 || w1 != w2 || d1 != d2 || !bytes.Equal(p1, p2) {
						t.Fatalf("row %d at 1/%d: parquet %d %dx%d/%d %v, tar %d %dx%d/%d %v", i, d, l1, w1, h1, d1, err1, l2, w2, h2, d2, err2)
					}
					if v := loadertest.VaryingSet[i]; h1 != v.H || w1 != v.W || l1 != v.Label {
						t.Fatalf("row %d: %d %dx%d, want %+v", i, l1, w1, h1, v)
					}
				}
				// Sample is SampleSized at full size.
				_, p, err := src.Sample(i, a)
				if v := loadertest.VaryingSet[i]; err != nil || len(p) != v.W*v.H*3 {
					t.Fatalf("Sample(%d): %d bytes, %v", i, len(p), err)
				}
			}
			if !bytes.Equal(loadertest.StreamResized(t, src), loadertest.StreamResized(t, ref)) {
				t.Fatal("a resizing stream of the Parquet file and of the tar differ")
			}
		})
	}
	// Before size=any was known, the first image's size was taken and
	// every other size failed; resize=bilinear still needs a size.
	if _, err := loader.Open("parquet:" + path + "?size=any&resize=bilinear"); err == nil || !strings.Contains(err.Error(), "needs a size") {
		t.Errorf("size=any&resize=bilinear: %v", err)
	}
}
