package arrow

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/png"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderd/loaderd/loader"
)

// setOf is row i's label set: one to three of 6 classes.
func setOf(i int) []int64 { return [][]int64{{int64(i % 6)}, {1, 5}, {0, 2, 4}}[i%3] }

// fieldsFile writes an Arrow file of 10 rows in two record batches: 4×4
// PNGs, a list<int64> label column, a string caption and a binary meta
// column null in every third row; it returns its path.
func fieldsFile(t *testing.T) string {
	mem := memory.NewGoAllocator()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "image", Type: arrow.BinaryTypes.Binary},
		{Name: "labels", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)},
		{Name: "caption", Type: arrow.BinaryTypes.String},
		{Name: "meta", Type: arrow.BinaryTypes.Binary, Nullable: true},
	}, nil)
	batch := func(lo, hi int) []arrow.Array {
		img, lab := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary), array.NewListBuilder(mem, arrow.PrimitiveTypes.Int64)
		capt, meta := array.NewStringBuilder(mem), array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
		for i := lo; i < hi; i++ {
			g := image.NewGray(image.Rect(0, 0, 4, 4))
			g.Pix[0] = uint8(i)
			var b bytes.Buffer
			if err := png.Encode(&b, g); err != nil {
				t.Fatal(err)
			}
			img.Append(b.Bytes())
			lab.Append(true)
			for _, c := range setOf(i) {
				lab.ValueBuilder().(*array.Int64Builder).Append(c)
			}
			capt.Append(fmt.Sprintf("row %d", i))
			if i%3 == 2 {
				meta.AppendNull()
			} else {
				meta.Append([]byte(strings.Repeat("m", i)))
			}
		}
		return []arrow.Array{img.NewArray(), lab.NewArray(), capt.NewArray(), meta.NewArray()}
	}
	path := filepath.Join(t.TempDir(), "f.arrow")
	writeIPC(t, path, schema, batch(0, 4), batch(4, 10))
	return path
}

func TestArrowFields(t *testing.T) {
	path := fieldsFile(t)
	src, err := loader.Open("arrow:" + path + "?label=labels&fields=caption,meta&size=4x4")
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
		want := setOf(i)
		l, _ := lb.Label(int64(i))
		if err != nil || len(set) != len(want) || l != int32(want[0]) {
			t.Errorf("row %d: set %v label %d (%v), want %v", i, set, l, err, want)
		}
		for k := range set {
			if int64(set[k]) != want[k] {
				t.Errorf("row %d: set %v, want %v", i, set, want)
			}
		}
	}
}

func TestArrowFieldErrors(t *testing.T) {
	path := fieldsFile(t)
	src, err := loader.Open("arrow:" + path + "?label=labels&fields=meta&maxfieldbytes=6&size=4x4")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	fs, _ := loader.As[loader.FieldSource](src)
	if _, _, err := fs.AppendField(nil, 6, 0); err != nil {
		t.Errorf("6 bytes under maxfieldbytes=6: %v", err)
	}
	_, _, err = fs.AppendField(nil, 7, 0)
	if !errors.Is(err, loader.ErrFieldTooLarge) || !strings.Contains(err.Error(), "f.arrow: record 7") || !strings.Contains(err.Error(), `"meta"`) {
		t.Errorf("7 bytes over maxfieldbytes=6: %v", err)
	}
	for _, c := range []struct{ opts, want string }{
		{"label=labels&fields=nope", `"nope"`},
		{"label=labels&fields=labels", "want binary or string"},
		{"label=caption", "want an integer"},
	} {
		if s, err := loader.Open("arrow:" + path + "?size=4x4&" + c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
			if s != nil {
				s.Close()
			}
			t.Errorf("%s: %v, want an error with %q", c.opts, err, c.want)
		}
	}
}
