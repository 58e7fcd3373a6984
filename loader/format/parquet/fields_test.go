package parquet

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/loaderd/loaderd/loader"
)

// setOf is row i's label set: one to three of 6 classes.
func setOf(i int) []int32 { return [][]int32{{int32(i % 6)}, {1, 5}, {0, 2, 4}}[i%3] }

// fieldsParquet writes a Parquet file of 10 rows in row groups of 4: 4×4
// PNGs, a list<int64> label column, a string caption and a binary meta
// column null in every third row; it returns its path.
func fieldsParquet(t *testing.T) string {
	mem := memory.NewGoAllocator()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "image", Type: arrow.BinaryTypes.Binary},
		{Name: "labels", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)},
		{Name: "caption", Type: arrow.BinaryTypes.String},
		{Name: "meta", Type: arrow.BinaryTypes.Binary, Nullable: true},
	}, nil)
	img, lab := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary), array.NewListBuilder(mem, arrow.PrimitiveTypes.Int64)
	capt, meta := array.NewStringBuilder(mem), array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
	for i := range 10 {
		img.Append(pngOf(t, []byte{byte(i), 2, 3}, 1, 1))
		lab.Append(true)
		for _, c := range setOf(i) {
			lab.ValueBuilder().(*array.Int64Builder).Append(int64(c))
		}
		capt.Append(fmt.Sprintf("row %d", i))
		if i%3 == 2 {
			meta.AppendNull()
		} else {
			meta.Append([]byte(strings.Repeat("m", i)))
		}
	}
	rec := array.NewRecordBatch(schema, []arrow.Array{img.NewArray(), lab.NewArray(), capt.NewArray(), meta.NewArray()}, 10)
	defer rec.Release()
	path := filepath.Join(t.TempDir(), "f.parquet")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pqarrow.NewFileWriter(schema, f, parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(4)), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestParquetFields(t *testing.T) {
	path := fieldsParquet(t)
	src, err := loader.Open("parquet:" + path + "?label=labels&fields=caption,meta&size=1x1")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	fs, ok := loader.As[loader.FieldSource](src)
	if !ok || !slices.Equal(fs.FieldNames(), []string{"caption", "meta"}) || !fs.MultiLabel() || len(src.Classes()) != 6 {
		t.Fatalf("FieldSource %v: fields %q, multi-label %v, classes %q", ok, fs.FieldNames(), fs.MultiLabel(), src.Classes())
	}
	lb, _ := loader.As[loader.Labeler](src)
	for i := range 10 {
		c, ok, err := fs.AppendField(nil, int64(i), 0)
		if err != nil || !ok || string(c) != fmt.Sprintf("row %d", i) {
			t.Errorf("row %d caption %q %v %v", i, c, ok, err)
		}
		m, ok, err := fs.AppendField(nil, int64(i), 1)
		if err != nil || ok != (i%3 != 2) || ok && string(m) != strings.Repeat("m", i) || !ok && m != nil {
			t.Errorf("row %d meta %q %v %v", i, m, ok, err)
		}
		set, err := fs.AppendLabels(nil, int64(i))
		l, _ := lb.Label(int64(i))
		if err != nil || !slices.Equal(set, setOf(i)) || l != setOf(i)[0] {
			t.Errorf("row %d: set %v label %d (%v), want %v", i, set, l, err, setOf(i))
		}
	}
}

func TestParquetFieldErrors(t *testing.T) {
	path := fieldsParquet(t)
	src, err := loader.Open("parquet:" + path + "?label=labels&fields=meta&maxfieldbytes=6&size=1x1")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	fs, _ := loader.As[loader.FieldSource](src)
	if _, _, err := fs.AppendField(nil, 6, 0); err != nil {
		t.Errorf("6 bytes under maxfieldbytes=6: %v", err)
	}
	_, _, err = fs.AppendField(nil, 7, 0)
	if !errors.Is(err, loader.ErrFieldTooLarge) || !strings.Contains(err.Error(), "f.parquet: record 7") || !strings.Contains(err.Error(), `"meta"`) {
		t.Errorf("7 bytes over maxfieldbytes=6: %v", err)
	}
	for _, c := range []struct{ opts, want string }{
		{"label=labels&fields=nope", `"nope"`},
		{"label=labels&fields=labels", "no field column"},
		{"label=caption", "want an integer"},
	} {
		if s, err := loader.Open("parquet:" + path + "?size=1x1&" + c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
			if s != nil {
				s.Close()
			}
			t.Errorf("%s: %v, want an error with %q", c.opts, err, c.want)
		}
	}
}
