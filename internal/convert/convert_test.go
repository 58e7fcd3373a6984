package convert

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/loader"
	_ "github.com/loaderd/loaderd/loader/format/all" // From takes any format
)

const cifarJPEGTar = "../../../shared/data/cifar10-train-jpg.tar"

// sameSamples compares every sample of two sources.
func sameSamples(t *testing.T, got, want loader.Source) {
	t.Helper()
	if got.Len() != want.Len() || !slices.Equal(got.Classes(), want.Classes()) {
		t.Fatalf("%s: %d samples, classes %v; want %d, %v", got, got.Len(), got.Classes(), want.Len(), want.Classes())
	}
	a, b := make([]byte, got.Spec().Bytes()), make([]byte, want.Spec().Bytes())
	for i := range got.Len() {
		la, pa, err := got.Sample(i, a)
		if err != nil {
			t.Fatal(err)
		}
		lb, pb, err := want.Sample(i, b)
		if err != nil {
			t.Fatal(err)
		}
		if la != lb || !bytes.Equal(pa, pb) {
			t.Fatalf("sample %d: label %d vs %d, pixels equal %v", i, la, lb, bytes.Equal(pa, pb))
		}
	}
}

// TestConvertCIFARJPEGs: the real CIFAR-10 JPEGs converted to Arrow shards
// read back as the same pixels and labels as decoding the tar directly.
func TestConvertCIFARJPEGs(t *testing.T) {
	if _, err := os.Stat(cifarJPEGTar); os.IsNotExist(err) {
		t.Skipf("skipped: %s is absent (the real CIFAR-10 JPEGs)", cifarJPEGTar)
	}
	out := t.TempDir()
	var progress bytes.Buffer
	s, err := Run(context.Background(), Options{From: "tar:" + cifarJPEGTar, To: "arrow:" + out, Shard: 20000, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	if s.Samples != 50000 || len(s.Files) != 3 || s.Skipped != 0 || s.Bytes < 50000*3072 {
		t.Fatalf("summary %+v", s)
	}
	if !strings.Contains(progress.String(), "50000/50000 100.0%") {
		t.Fatalf("progress %q lacks the final count", progress.String())
	}
	got, err := loader.Open("arrow:" + out)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	want, err := loader.Open("tar:" + cifarJPEGTar)
	if err != nil {
		t.Fatal(err)
	}
	defer want.Close()
	sameSamples(t, got, want)
	t.Log("\n" + s.String())
}

// TestConvertCHW: a CHW source (CIFAR binary) becomes HWC pixels.
func TestConvertCHW(t *testing.T) {
	from := "cifar:../../loader/testdata/cifar10"
	out := filepath.Join(t.TempDir(), "c.arrow")
	s, err := Run(context.Background(), Options{From: from, To: "arrow:" + out, BatchRows: 7, Workers: 3})
	if err != nil {
		t.Fatal(err)
	}
	src, _ := loader.Open(from)
	defer src.Close()
	got, err := loader.Open("arrow:" + out)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	if s.Samples != src.Len() || got.Len() != src.Len() || got.Spec().Layout != sample.HWC || !slices.Equal(got.Classes(), src.Classes()) {
		t.Fatalf("summary %+v; arrow %d samples %v", s, got.Len(), got.Spec())
	}
	for i := range src.Len() {
		l, chw, _ := src.Sample(i, nil)
		gl, hwc, err := got.Sample(i, nil)
		if err != nil || gl != l {
			t.Fatalf("sample %d: label %d want %d, %v", i, gl, l, err)
		}
		for c := range 3 {
			for p := range 1024 {
				if hwc[p*3+c] != chw[c*1024+p] {
					t.Fatalf("sample %d channel %d pixel %d: %d, want %d", i, c, p, hwc[p*3+c], chw[c*1024+p])
				}
			}
		}
	}
}

// TestConvertSkip: unreadable samples fail a conversion, or with the skip
// policy are left out and listed; nothing partial is left behind.
func TestConvertSkip(t *testing.T) {
	dir := t.TempDir()
	good, err := os.ReadFile("../../loader/testdata/formats/img/rgb.png")
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"a/0.png", "a/1.png", "b/2.png"} {
		p := filepath.Join(dir, "in", name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		data := good
		if i == 1 {
			data = good[:len(good)-20]
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	from, out := "folder:"+filepath.Join(dir, "in"), filepath.Join(dir, "out")
	_, err = Run(context.Background(), Options{From: from, To: "arrow:" + out})
	if !errors.Is(err, loader.ErrTruncated) {
		t.Fatalf("fail policy: %v, want ErrTruncated", err)
	}
	if left, _ := filepath.Glob(filepath.Join(out, "*")); len(left) != 0 {
		t.Fatalf("a failed conversion left %v", left)
	}
	s, err := Run(context.Background(), Options{From: from, To: "arrow:" + out, OnError: loader.SkipOnError})
	if err != nil {
		t.Fatal(err)
	}
	if s.Samples != 2 || s.Skipped != 1 || len(s.Errors) != 1 || !strings.Contains(s.Errors[0], "a/1.png") ||
		!strings.Contains(s.String(), "skipped  1 unreadable") {
		t.Fatalf("summary %+v", s)
	}
	got, err := loader.Open("arrow:" + out)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	var labels []int32
	for i := range got.Len() {
		l, _, _ := got.Sample(i, nil)
		labels = append(labels, l)
	}
	if !slices.Equal(labels, []int32{0, 1}) || !slices.Equal(got.Classes(), []string{"a", "b"}) {
		t.Fatalf("labels %v classes %v", labels, got.Classes())
	}
}

func TestConvertOptions(t *testing.T) {
	for _, o := range []Options{
		{From: "synthetic:10", To: "parquet:x"},
		{From: "synthetic:10", To: "arrow:x.arrow", Shard: 5},
		{From: "synthetic:10", To: "arrow:x", Workers: -1},
	} {
		if _, err := Run(context.Background(), o); !errors.Is(err, ErrOptions) {
			t.Errorf("%+v: %v, want ErrOptions", o, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, Options{From: "synthetic:10", To: "arrow:" + filepath.Join(t.TempDir(), "x.arrow")}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

func ExampleRun() {
	out, _ := os.MkdirTemp("", "convert-example")
	defer os.RemoveAll(out)
	s, err := Run(context.Background(), Options{From: "synthetic:5000", To: "arrow:" + out, Shard: 2000})
	if err != nil {
		panic(err)
	}
	fmt.Println(s.Samples, len(s.Files), s.Spec, s.Classes[:2])
	// Output: 5000 3 hwc[32 32 3]/u8 [class0 class1]
}
