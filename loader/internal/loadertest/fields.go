package loadertest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderd/loaderd/loader"
)

// The fields= fixture of the columnar formats (Arrow, Parquet): rows with
// an encoded image, a list<int64> label set, a string caption and a
// binary meta column that is null in every third row.

// FieldsSchema is the fixture's schema.
var FieldsSchema = arrow.NewSchema([]arrow.Field{
	{Name: "image", Type: arrow.BinaryTypes.Binary},
	{Name: "labels", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)},
	{Name: "caption", Type: arrow.BinaryTypes.String},
	{Name: "meta", Type: arrow.BinaryTypes.Binary, Nullable: true},
}, nil)

// LabelSet is row i's label set: one to three of 6 classes.
func LabelSet(i int) []int32 { return [][]int32{{int32(i % 6)}, {1, 5}, {0, 2, 4}}[i%3] }

// FieldsColumns builds FieldsSchema's columns for rows [lo, hi), image(i)
// being row i's encoded image.
func FieldsColumns(lo, hi int, image func(i int) []byte) []arrow.Array {
	mem := memory.NewGoAllocator()
	img, lab := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary), array.NewListBuilder(mem, arrow.PrimitiveTypes.Int64)
	capt, meta := array.NewStringBuilder(mem), array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
	for i := lo; i < hi; i++ {
		img.Append(image(i))
		lab.Append(true)
		for _, c := range LabelSet(i) {
			lab.ValueBuilder().(*array.Int64Builder).Append(int64(c))
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

// CheckFields opens the fixture's 10 rows as spec ("FORMAT:PATH?...",
// with label=labels&fields=caption,meta) and checks every field and
// label set.
func CheckFields(t *testing.T, spec string) {
	t.Helper()
	src, err := loader.Open(spec)
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
		if want := LabelSet(i); err != nil || !slices.Equal(set, want) || l != want[0] {
			t.Errorf("row %d: set %v label %d (%v), want %v", i, set, l, err, want)
		}
	}
}

// CheckFieldErrors checks the errors of the fixture at path opened as
// format with opts (its size=): a field over maxfieldbytes names the file
// and record, and bad column choices are refused; asField is the format's
// refusal of the label list as a field.
func CheckFieldErrors(t *testing.T, format, path, opts, asField string) {
	t.Helper()
	src, err := loader.Open(format + ":" + path + "?label=labels&fields=meta&maxfieldbytes=6&" + opts)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	fs, _ := loader.As[loader.FieldSource](src)
	if _, _, err := fs.AppendField(nil, 6, 0); err != nil {
		t.Errorf("6 bytes under maxfieldbytes=6: %v", err)
	}
	_, _, err = fs.AppendField(nil, 7, 0)
	if file := path[strings.LastIndexByte(path, '/')+1:]; !errors.Is(err, loader.ErrFieldTooLarge) ||
		!strings.Contains(err.Error(), file+": record 7") || !strings.Contains(err.Error(), `"meta"`) {
		t.Errorf("7 bytes over maxfieldbytes=6: %v", err)
	}
	for _, c := range []struct{ opts, want string }{
		{"label=labels&fields=nope", `"nope"`},
		{"label=labels&fields=labels", asField},
		{"label=caption", "want an integer"},
	} {
		if s, err := loader.Open(format + ":" + path + "?" + opts + "&" + c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
			if s != nil {
				s.Close()
			}
			t.Errorf("%s: %v, want an error with %q", c.opts, err, c.want)
		}
	}
}
