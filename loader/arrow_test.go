package loader

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderd/loaderd/augment"
)

// writeArrow writes samples [lo, hi) of src to path with ArrowWriter.
func writeArrow(t testing.TB, path string, src Source, lo, hi int64, batchRows int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := NewArrowWriter(f, src.Spec(), src.Classes(), batchRows)
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

// inside reports whether p lies within the mapping m.
func inside(p, m []byte) bool {
	a, b := uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(unsafe.Pointer(unsafe.SliceData(m)))
	return a >= b && a+uintptr(len(p)) <= b+uintptr(len(m))
}

// TestArrowRoundTrip: what ArrowWriter writes, over two shards and
// several record batches (the last one short), reads back sample for
// sample, as views of the mapped files, without allocating.
func TestArrowRoundTrip(t *testing.T) {
	syn := NewSynthetic(300, 7)
	dir := t.TempDir()
	writeArrow(t, filepath.Join(dir, "part-0.arrow"), syn, 0, 200, 64)
	writeArrow(t, filepath.Join(dir, "part-1.arrow"), syn, 200, 300, 64)
	src, err := Open("arrow:" + dir)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	a := src.(*Arrow)
	if a.Len() != 300 || a.Spec() != syn.Spec() || !slices.Equal(a.Classes(), syn.Classes()) || len(a.batches) != 6 {
		t.Fatalf("len %d spec %v classes %v batches %d", a.Len(), a.Spec(), a.Classes(), len(a.batches))
	}
	wantL, wantP := samples(t, syn)
	for i := range a.Len() {
		l, p, err := a.Sample(i, nil)
		if err != nil || l != wantL[i] || !bytes.Equal(p, wantP[i]) {
			t.Fatalf("sample %d: label %d (want %d), pixels equal %v, %v", i, l, wantL[i], bytes.Equal(p, wantP[i]), err)
		}
		if file := a.files[i/200].data; !inside(p, file) {
			t.Fatalf("sample %d is not a view of its mapped file", i)
		}
	}
	if n := testing.AllocsPerRun(100, func() { a.Sample(123, nil) }); n != 0 {
		t.Fatalf("%v allocations per Sample, want 0", n)
	}
	if _, _, err := a.Sample(300, nil); !errors.Is(err, ErrIndex) {
		t.Fatalf("sample 300: %v, want ErrIndex", err)
	}
}

// TestArrowForeign reads a file written by other tools' conventions: a
// fixed_size_list<uint8> pixel column, int64 labels, no loaderd metadata
// (the shape comes from size=, classes from the labels), nulls.
func TestArrowForeign(t *testing.T) {
	const rows, width = 5, 2 * 2 * 3
	mem := memory.NewGoAllocator()
	lb := array.NewInt64Builder(mem)
	lb.AppendValues([]int64{3, 1, 0, 2, 1}, []bool{true, true, false, true, true})
	pb := array.NewFixedSizeListBuilder(mem, width, arrow.PrimitiveTypes.Uint8)
	vb := pb.ValueBuilder().(*array.Uint8Builder)
	for r := range rows {
		if r == 3 {
			pb.AppendNull() // with width null bytes under it
			continue
		}
		pb.Append(true)
		for c := range width {
			vb.Append(uint8(r*16 + c))
		}
	}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "y", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "image", Type: arrow.FixedSizeListOf(width, arrow.PrimitiveTypes.Uint8), Nullable: true},
	}, nil)
	rec := array.NewRecordBatch(schema, []arrow.Array{lb.NewArray(), pb.NewArray()}, rows)
	var buf bytes.Buffer
	w, err := ipc.NewFileWriter(&buf, ipc.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "foreign.arrow")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenArrow(path); !errors.Is(err, ErrColumn) {
		t.Fatalf("default column names: %v, want ErrColumn", err)
	}
	a, err := OpenArrow(path + "?pixels=image&label=y&size=2x2")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	want := augment.Spec{H: 2, W: 2, C: 3, DType: augment.U8, Layout: augment.HWC}
	if a.Spec() != want || !slices.Equal(a.Classes(), []string{"0", "1", "2", "3"}) {
		t.Fatalf("spec %v classes %v", a.Spec(), a.Classes())
	}
	for i, tc := range []struct {
		label int32
		err   error
	}{{3, nil}, {1, nil}, {0, ErrLabel}, {0, ErrCorrupt}, {1, nil}} {
		l, p, err := a.Sample(int64(i), nil)
		var re *RecordError
		switch {
		case tc.err != nil && (!errors.Is(err, tc.err) || !errors.As(err, &re) || re.Record != int64(i)):
			t.Fatalf("row %d: %v, want %v naming record %d", i, err, tc.err, i)
		case tc.err == nil && (err != nil || l != tc.label || p[0] != uint8(i*16) || p[width-1] != uint8(i*16+width-1)):
			t.Fatalf("row %d: label %d pixels %v, %v", i, l, p, err)
		}
	}
}

// FuzzArrowIndex: any bytes give an index or an error wrapping a sentinel,
// never a panic; every indexed pixel row lies inside the file.
func FuzzArrowIndex(f *testing.F) {
	for _, name := range []string{"bad/label.arrow", "bad/truncated.arrow"} {
		f.Add(fixture(f, name))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a := &Arrow{files: []arrowFile{{path: "fuzz", data: data}}}
		err := a.index(0, "pixels", "label", 0, 0)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrColumn) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		n := int64(0)
		for _, b := range a.batches {
			if int64(len(b.pix)) != b.n*int64(a.spec.Bytes()) || len(b.pix) > 0 && !inside(b.pix, data) {
				t.Fatalf("batch of %d rows has %d pixel bytes for %v, or lies outside the file", b.n, len(b.pix), a.spec)
			}
			n += b.n
		}
		if n != int64(len(a.labels)) {
			t.Fatalf("%d rows, %d labels", n, len(a.labels))
		}
	})
}
