package arrow

import (
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/loaderd/loaderd/loader"
)

// Extra fields and label sets (loader.FieldSource) of Arrow files of
// encoded images: fields=COL,… carries those columns (binary or string,
// large or not) as bytes, views of the mapping checked at open like the
// image column; a label column of list<int> makes the dataset
// multi-label, each row's classes its label set.

// binCol is one binary-like column of one record batch, a view of the
// mapping: row j is values[offs[j]:offs[j+1]], absent where null[j].
type binCol struct {
	values []byte
	offs   []int64
	null   []bool // nil when no row is null
}

// binaryColumn checks and records a binary, large_binary, string or
// large_string column of a record batch whose first row is row of its file.
func binaryColumn(col arrow.Array, row int64) (binCol, error) {
	n := int64(col.Len())
	var c binCol
	switch a := col.(type) {
	case *array.Binary:
		if n > 0 {
			for _, o := range a.ValueOffsets() {
				c.offs = append(c.offs, int64(o))
			}
		}
	case *array.String:
		if n > 0 {
			for _, o := range a.ValueOffsets() {
				c.offs = append(c.offs, int64(o))
			}
		}
	case *array.LargeBinary:
		if n > 0 {
			c.offs = append(c.offs, a.ValueOffsets()...)
		}
	case *array.LargeString:
		if n > 0 {
			c.offs = append(c.offs, a.ValueOffsets()...)
		}
	default:
		return c, fmt.Errorf("%w: field column is %s, want binary or string", loader.ErrColumn, col.DataType())
	}
	if n == 0 {
		c.offs = []int64{0}
	}
	if bufs := col.Data().Buffers(); len(bufs) > 2 && bufs[2] != nil {
		c.values = bufs[2].Bytes()
	}
	if int64(len(c.offs)) != n+1 || c.offs[0] < 0 || c.offs[n] > int64(len(c.values)) {
		return c, fmt.Errorf("%w: field offsets outside the column's %d bytes", loader.ErrCorrupt, len(c.values))
	}
	for j := range n {
		if c.offs[j] > c.offs[j+1] {
			return c, fmt.Errorf("%w: field offsets decrease at row %d", loader.ErrCorrupt, row+j)
		}
		if col.IsNull(int(j)) {
			if c.null == nil {
				c.null = make([]bool, n)
			}
			c.null[j] = true
		}
	}
	return c, nil
}

// labelSets holds every row's label set: row i's classes are
// sets[ends[i]:ends[i+1]].
type labelSets struct {
	sets []int32
	ends []int64 // rows+1 entries once any is added
}

// isList reports whether a label column holds label sets.
func isList(t arrow.DataType) bool {
	switch t.(type) {
	case *arrow.ListType, *arrow.LargeListType:
		return true
	}
	return false
}

// add appends a record batch's label sets, and each set's first class
// to labels (what single-label clients see). A null or empty set, or a
// class that is null or negative, fails naming the row.
func (s *labelSets) add(labels *[]int32, col arrow.Array, row int64) error {
	l, ok := col.(array.ListLike)
	if !ok {
		return fmt.Errorf("%w: label column is %s, want an integer list", loader.ErrColumn, col.DataType())
	}
	var classes []int32
	if err := appendLabels(&classes, l.ListValues()); err != nil {
		return err
	}
	if len(s.ends) == 0 {
		s.ends = append(s.ends, 0)
	}
	for j := range col.Len() {
		lo, hi := l.ValueOffsets(j)
		if col.IsNull(j) || lo >= hi || lo < 0 || hi > int64(len(classes)) {
			return fmt.Errorf("%w: row %d: label set is null or empty", loader.ErrLabel, row+int64(j))
		}
		for _, c := range classes[lo:hi] {
			if c < 0 {
				return fmt.Errorf("%w: row %d: a class of the label set is null, negative or over int32", loader.ErrLabel, row+int64(j))
			}
		}
		s.sets = append(s.sets, classes[lo:hi]...)
		s.ends = append(s.ends, int64(len(s.sets)))
		*labels = append(*labels, classes[lo])
	}
	return nil
}

// classes extends classes to name every class of the sets, as "0" to
// the largest, unless the metadata named them: then a larger one fails.
func (s *labelSets) classes(classes []string, named bool) ([]string, error) {
	for _, c := range s.sets {
		switch {
		case int(c) < len(classes):
		case named:
			return nil, fmt.Errorf("%w: class %d of a label set, the metadata names %d", loader.ErrLabel, c, len(classes))
		default:
			for i := len(classes); i <= int(c); i++ {
				classes = append(classes, strconv.Itoa(i))
			}
		}
	}
	return classes, nil
}

// addFields records the fields= columns of the record batch just added,
// whose first row is row of its file.
func (a *encSource) addFields(schema *arrow.Schema, rec interface{ Column(int) arrow.Array }, row int64) error {
	bt := &a.batches[len(a.batches)-1]
	for _, name := range a.fieldNames {
		ix := schema.FieldIndices(name)
		if len(ix) != 1 {
			return fmt.Errorf("%w: want one %q column (fields=), schema is %s", loader.ErrColumn, name, schema)
		}
		c, err := binaryColumn(rec.Column(ix[0]), row)
		if err != nil {
			return fmt.Errorf("column %q: %w", name, err)
		}
		bt.fields = append(bt.fields, c)
	}
	return nil
}

// FieldNames implements loader.FieldSource: fields= as given.
func (a *encSource) FieldNames() []string { return a.fieldNames }

// MultiLabel implements loader.FieldSource: the label column is a list.
func (a *encSource) MultiLabel() bool { return a.multi }

// AppendField implements loader.FieldSource: a copy of row i's cell out
// of the mapping; a null cell is absent, one over maxfieldbytes= fails
// naming the file, row and column.
func (a *encSource) AppendField(dst []byte, i int64, f int) ([]byte, bool, error) {
	if i < 0 || i >= a.Len() {
		return dst, false, &loader.RecordError{File: a.path, Record: i, Err: loader.ErrIndex}
	}
	b, j := a.batch(i)
	c := &b.fields[f]
	switch size := c.offs[j+1] - c.offs[j]; {
	case a.files[b.file].data == nil:
		return dst, false, loader.ErrClosed
	case c.null != nil && c.null[j]:
		return dst, false, nil
	case size > a.maxField:
		return dst, false, &loader.RecordError{File: a.files[b.file].path, Record: b.row + j,
			Err: fmt.Errorf("%w: field %q has %d bytes, maxfieldbytes=%d", loader.ErrFieldTooLarge, a.fieldNames[f], size, a.maxField)}
	}
	return append(dst, c.values[c.offs[j]:c.offs[j+1]]...), true, nil
}

// AppendLabels implements loader.FieldSource: row i's label set.
func (a *encSource) AppendLabels(dst []int32, i int64) ([]int32, error) {
	if i < 0 || i >= a.Len() || !a.multi {
		return dst, &loader.RecordError{File: a.path, Record: i, Err: loader.ErrIndex}
	}
	return append(dst, a.sets.sets[a.sets.ends[i]:a.sets.ends[i+1]]...), nil
}

var _ loader.FieldSource = (*encSource)(nil)
