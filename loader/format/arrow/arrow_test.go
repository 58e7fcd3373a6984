package arrow

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/internal/loadertest"
)

// The fixtures are shared with the other formats' tests.
const fixtures = "../../testdata/formats/"

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
	if _, err := open(path); !errors.Is(err, loader.ErrColumn) {
		t.Fatalf("default column names: %v, want ErrColumn", err)
	}
	if _, err := openAny(path + "?pixels=image&label=y&size=2x2&fields=y"); err == nil || !strings.Contains(err.Error(), "fields= applies to encoded images") {
		t.Fatalf("fields= on raw pixels: %v", err)
	}
	a, err := open(path + "?pixels=image&label=y&size=2x2")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	want := augment.Spec{H: 2, W: 2, C: 3, DType: sample.U8, Layout: sample.HWC}
	if a.Spec() != want || !slices.Equal(a.Classes(), []string{"0", "1", "2", "3"}) {
		t.Fatalf("spec %v classes %v", a.Spec(), a.Classes())
	}
	for i, tc := range []struct {
		label int32
		err   error
	}{{3, nil}, {1, nil}, {0, loader.ErrLabel}, {0, loader.ErrCorrupt}, {1, nil}} {
		l, p, err := a.Sample(int64(i), nil)
		var re *loader.RecordError
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
		f.Add(loadertest.Fixture(f, name))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a := &source{mapped: mapped{files: []arrowFile{{path: "fuzz", data: data}}}}
		err := a.index(0, "pixels", "label", 0, 0)
		if err != nil {
			if !errors.Is(err, loader.ErrCorrupt) && !errors.Is(err, loader.ErrTruncated) && !errors.Is(err, loader.ErrColumn) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		n := int64(0)
		for _, b := range a.batches {
			if int64(len(b.pix)) != b.n*int64(a.spec.Bytes()) || len(b.pix) > 0 && !Inside(b.pix, data) {
				t.Fatalf("batch of %d rows has %d pixel bytes for %v, or lies outside the file", b.n, len(b.pix), a.spec)
			}
			n += b.n
		}
		if n != int64(len(a.labels)) {
			t.Fatalf("%d rows, %d labels", n, len(a.labels))
		}
	})
}

// TestBadInputs maps each malformed Arrow fixture in testdata/formats/bad
// to its error: the sentinel, and the file the *RecordError names.
func TestBadInputs(t *testing.T) {
	const bad = fixtures + "bad/"
	loadertest.CheckBadInputs(t, []loadertest.BadInput{
		{Spec: "arrow:" + bad + "label.arrow", Sample: "#1", Want: loader.ErrLabel, File: "label.arrow"},
		{Spec: "arrow:" + bad + "truncated.arrow", Want: loader.ErrCorrupt, File: "truncated.arrow"},
	}, nil)
}

// TestFormatOptions: options and PATH are checked.
func TestFormatOptions(t *testing.T) {
	loadertest.CheckOpenErrors(t, map[string]string{
		"arrow:" + fixtures + "folder":             "no *.arrow file",
		"arrow:" + fixtures + "folder?pixels=a&x=": `unknown option "x"`,
	})
}
