package parquet

import (
	"bytes"
	"errors"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/loaderd/loaderd/internal/convert"
	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/format/synthetic"
	_ "github.com/loaderd/loaderd/loader/format/tar" // the real CIFAR-10 JPEGs come as a tar
	"github.com/loaderd/loaderd/loader/imagedec"
	"github.com/loaderd/loaderd/loader/internal/loadertest"
)

// The fixtures are shared with the other formats' tests.
const fixtures = "../../testdata/formats/"

// pngOf encodes HWC RGB pixels as a PNG.
func pngOf(t testing.TB, pix []byte, h, w int) []byte {
	t.Helper()
	m := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i := range h * w {
		copy(m.Pix[4*i:], pix[3*i:3*i+3])
		m.Pix[4*i+3] = 255
	}
	var b bytes.Buffer
	if err := png.Encode(&b, m); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestParquetHFCIFAR: every tenth real CIFAR-10 image, PNG-encoded into a
// Parquet file in the Hugging Face layout (img: struct<bytes, path>,
// label: int64, "huggingface" metadata, Snappy, row groups of 1000), reads
// back exactly: labels, class names and pixels.
func TestParquetHFCIFAR(t *testing.T) {
	ts, err := loader.Open("tar:" + loadertest.CIFARJPEGTar(t))
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	path := filepath.Join(t.TempDir(), "train-00000-of-00001.parquet")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := convert.NewParquetWriter(f, "img", "label", ts.Classes(), 1000)
	if err != nil {
		t.Fatal(err)
	}
	var idx []int64
	var want [][]byte
	scratch := make([]byte, 3072)
	for i := int64(0); i < ts.Len(); i += 10 {
		l, p, err := ts.Sample(i, scratch)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(pngOf(t, p, 32, 32), "", int64(l)); err != nil {
			t.Fatal(err)
		}
		idx, want = append(idx, i), append(want, bytes.Clone(p))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	src, err := loader.Open("parquet:" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if src.Len() != int64(len(idx)) || !slices.Equal(src.Classes(), loadertest.CIFAR10Classes) || src.Spec() != ts.Spec() {
		t.Fatalf("len %d classes %v spec %v; want %d %v %v", src.Len(), src.Classes(), src.Spec(), len(idx), loadertest.CIFAR10Classes, ts.Spec())
	}
	for k, i := range idx {
		l, p, err := src.Sample(int64(k), scratch)
		wl, _ := ts.(loader.Labeler).Label(i)
		if err != nil || l != wl || !bytes.Equal(p, want[k]) {
			t.Fatalf("row %d (tar sample %d): label %d want %d, pixels equal %v, %v", k, i, l, wl, bytes.Equal(p, want[k]), err)
		}
	}
}

// TestParquetColumnsAndNulls: column names from options, the "image"
// fallback, class names from the metadata, and null images and labels
// as errors naming the file and row.
func TestParquetColumnsAndNulls(t *testing.T) {
	syn := synthetic.New(12, 3)
	_, pix := loadertest.Samples(t, syn)
	dir := t.TempDir()
	write := func(name, imgCol, labCol string) string {
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		w, err := convert.NewParquetWriter(f, imgCol, labCol, syn.Classes(), 5)
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range pix {
			img, label := pngOf(t, p, 32, 32), int64(i%10)
			switch i {
			case 7:
				img = nil
			case 9:
				label = -1
			}
			if err := w.Write(img, "x.png", label); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, spec := range []string{"parquet:" + write("a.parquet", "picture", "y") + "?image=picture&label=y",
		"parquet:" + write("b.parquet", "image", "label")} {
		src, err := loader.Open(spec)
		if err != nil {
			t.Fatal(err)
		}
		if src.Len() != 12 || !slices.Equal(src.Classes(), syn.Classes()) {
			t.Fatalf("%s: len %d classes %v", spec, src.Len(), src.Classes())
		}
		scratch := make([]byte, 3072)
		for i := range src.Len() {
			l, p, err := src.Sample(i, scratch)
			var re *loader.RecordError
			switch i {
			case 7, 9:
				want := map[int64]error{7: loader.ErrCorrupt, 9: loader.ErrLabel}[i]
				if !errors.Is(err, want) || !errors.As(err, &re) || re.Record != i {
					t.Fatalf("%s row %d: %v, want %v naming row %d", spec, i, err, want, i)
				}
			default:
				if err != nil || l != int32(i%10) || !bytes.Equal(p, pix[i]) {
					t.Fatalf("%s row %d: label %d, equal %v, %v", spec, i, l, bytes.Equal(p, pix[i]), err)
				}
			}
		}
		src.Close()
	}
}

// FuzzParquetRead: any bytes give rows or an error wrapping ErrCorrupt,
// ErrTruncated or ErrColumn, never a panic; rows read are consistent.
func FuzzParquetRead(f *testing.F) {
	for _, name := range []string{"bad/columns.parquet", "bad/truncated.parquet"} {
		f.Add(loadertest.Fixture(f, name))
	}
	var b bytes.Buffer
	w, err := convert.NewParquetWriter(&b, "img", "label", []string{"a", "b"}, 2)
	if err != nil {
		f.Fatal(err)
	}
	for i, img := range [][]byte{loadertest.Fixture(f, "img/rgb.png"), nil, loadertest.Fixture(f, "img/gray.png")} {
		w.Write(img, "p.png", int64(i)-1)
	}
	if err := w.Close(); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		p := &source{img: byteCol{offs: []int64{0}}}
		err := p.readData(data, "", "label")
		if err != nil {
			if !errors.Is(err, loader.ErrCorrupt) && !errors.Is(err, loader.ErrTruncated) && !errors.Is(err, loader.ErrColumn) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		if len(p.img.offs) != len(p.labels)+1 || p.img.null != nil && len(p.img.null) != len(p.labels) || p.img.offs[len(p.img.offs)-1] != int64(len(p.img.arena)) {
			t.Fatalf("%d offsets, %d labels, %d nulls, arena %d", len(p.img.offs), len(p.labels), len(p.img.null), len(p.img.arena))
		}
	})
}

// TestBadInputs maps each malformed Parquet fixture in testdata/formats/bad
// to its error: the sentinel, and the file the *RecordError names.
func TestBadInputs(t *testing.T) {
	const bad = fixtures + "bad/"
	loadertest.CheckBadInputs(t, []loadertest.BadInput{
		{Spec: "parquet:" + bad + "columns.parquet", Want: loader.ErrColumn, File: "columns.parquet"},
		{Spec: "parquet:" + bad + "truncated.parquet", Want: loader.ErrCorrupt, File: "truncated.parquet"},
	}, nil)
}

// TestFormatOptions: options and PATH are checked.
func TestFormatOptions(t *testing.T) {
	loadertest.CheckOpenErrors(t, map[string]string{
		"parquet:":                      "no path given",
		"parquet:x.parquet?resize=nope": "the only resize is bilinear",
	})
}

// TestParquetMaxBytes: an image over maxbytes= is refused before it is
// decoded, naming the file and row.
func TestParquetMaxBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.parquet")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := convert.NewParquetWriter(f, "img", "label", []string{"a"}, 2)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(loadertest.Fixture(t, "img/rgb.png"), "0.png", 0) // 88 bytes
	w.Write(loadertest.Fixture(t, "img/rgb.jpg"), "1.jpg", 0) // 645 bytes
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	src, err := loader.Open("parquet:" + path + "?maxbytes=100")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	scratch := make([]byte, 8*6*3)
	if _, _, err := src.Sample(0, scratch); err != nil {
		t.Fatal(err)
	}
	_, _, err = src.Sample(1, scratch)
	var re *loader.RecordError
	if !errors.Is(err, imagedec.ErrTooLarge) || !errors.As(err, &re) || re.File != path || re.Record != 1 {
		t.Fatalf("%v; want ErrTooLarge naming %s row 1", err, path)
	}
}
