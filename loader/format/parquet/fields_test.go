package parquet

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/loaderd/loaderd/loader/internal/loadertest"
)

// fieldsParquet writes loadertest's fields fixture as a Parquet file of 10
// rows, 1×1 PNGs, in row groups of 4; it returns its path.
func fieldsParquet(t *testing.T) string {
	cols := loadertest.FieldsColumns(0, 10, func(i int) []byte { return pngOf(t, []byte{byte(i), 2, 3}, 1, 1) })
	rec := array.NewRecordBatch(loadertest.FieldsSchema, cols, 10)
	defer rec.Release()
	path := filepath.Join(t.TempDir(), "f.parquet")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pqarrow.NewFileWriter(loadertest.FieldsSchema, f, parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(4)), pqarrow.DefaultWriterProps())
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
	loadertest.CheckFields(t, "parquet:"+fieldsParquet(t)+"?label=labels&fields=caption,meta&size=1x1")
}

func TestParquetFieldErrors(t *testing.T) {
	loadertest.CheckFieldErrors(t, "parquet", fieldsParquet(t), "size=1x1", "no field column")
}
