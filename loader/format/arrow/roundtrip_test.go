package arrow_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/loaderd/loaderd/internal/convert"
	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/format/arrow"
	"github.com/loaderd/loaderd/loader/format/synthetic"
	"github.com/loaderd/loaderd/loader/internal/loadertest"
)

// writeArrow writes samples [lo, hi) of src to path with convert's
// ArrowWriter.
func writeArrow(t testing.TB, path string, src loader.Source, lo, hi int64, batchRows int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := convert.NewArrowWriter(f, src.Spec(), src.Classes(), batchRows)
	if err != nil {
		t.Fatal(err)
	}
	scratch := make([]byte, src.Spec().Bytes())
	for i := lo; i < hi; i++ {
		l, p, err := src.Sample(i, scratch)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(l, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestArrowRoundTrip: what ArrowWriter writes, over two shards and
// several record batches (the last one short), reads back sample for
// sample, as views of the mapped files, without allocating.
func TestArrowRoundTrip(t *testing.T) {
	syn := synthetic.New(300, 7)
	dir := t.TempDir()
	writeArrow(t, filepath.Join(dir, "part-0.arrow"), syn, 0, 200, 64)
	writeArrow(t, filepath.Join(dir, "part-1.arrow"), syn, 200, 300, 64)
	a, err := loader.Open("arrow:" + dir)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.Len() != 300 || a.Spec() != syn.Spec() || !slices.Equal(a.Classes(), syn.Classes()) || arrow.Batches(a) != 6 {
		t.Fatalf("len %d spec %v classes %v batches %d", a.Len(), a.Spec(), a.Classes(), arrow.Batches(a))
	}
	wantL, wantP := loadertest.Samples(t, syn)
	for i := range a.Len() {
		l, p, err := a.Sample(i, nil)
		if err != nil || l != wantL[i] || !bytes.Equal(p, wantP[i]) {
			t.Fatalf("sample %d: label %d (want %d), pixels equal %v, %v", i, l, wantL[i], bytes.Equal(p, wantP[i]), err)
		}
		if file := arrow.Mapping(a, int(i/200)); !arrow.Inside(p, file) {
			t.Fatalf("sample %d is not a view of its mapped file", i)
		}
	}
	if n := testing.AllocsPerRun(100, func() { a.Sample(123, nil) }); n != 0 {
		t.Fatalf("%v allocations per Sample, want 0", n)
	}
	if _, _, err := a.Sample(300, nil); !errors.Is(err, loader.ErrIndex) {
		t.Fatalf("sample 300: %v, want ErrIndex", err)
	}
}
