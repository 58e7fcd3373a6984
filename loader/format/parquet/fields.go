package parquet

import (
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/loaderd/loaderd/loader"
)

// Extra fields and label sets (loader.FieldSource): fields=COL,… reads
// those binary or string columns at open, as the images are read, into
// arenas of their own; a label column that is a list of integers
// (list<int64>, Hugging Face's Sequence(ClassLabel)) makes the dataset
// multi-label.

// byteCol is one binary column of every row: row i is
// arena[offs[i]:offs[i+1]], absent where null[i].
type byteCol struct {
	name  string
	arena []byte
	offs  []int64 // starts with 0
	null  []bool  // nil while no row is null
}

// fieldColumns finds the fields= leaf columns: byte arrays, not repeated.
func fieldColumns(sc *schema.Schema, names []string) ([]int, error) {
	var cols []int
	for _, name := range names {
		c := sc.ColumnIndexByName(name)
		switch {
		case c < 0:
			return nil, fmt.Errorf("%w: no field column %q (fields=) in schema %s", loader.ErrColumn, name, schemaNames(sc))
		case sc.Column(c).PhysicalType() != parquet.Types.ByteArray || sc.Column(c).MaxRepetitionLevel() != 0:
			return nil, fmt.Errorf("%w: field column %s is %s, want binary or string", loader.ErrColumn, name, sc.Column(c).PhysicalType())
		}
		cols = append(cols, c)
	}
	return cols, nil
}

// listLabelColumn finds a label column that is a list of integers: its
// leaf, LABEL.list.element (or .item, or a legacy LABEL.element).
func listLabelColumn(sc *schema.Schema, label string) int {
	for i := range sc.NumColumns() {
		c := sc.Column(i)
		if strings.HasPrefix(c.Path(), label+".") && c.MaxRepetitionLevel() == 1 && c.ColumnPath()[0] == label {
			return i
		}
	}
	return -1
}

// read appends a row group's n values of column col.
func (b *byteCol) read(rg *file.RowGroupReader, col int, maxDef int16, n int64) error {
	cr, err := rg.Column(col)
	if err != nil {
		return fmt.Errorf("%w: %w", loader.ErrCorrupt, err)
	}
	r, ok := cr.(*file.ByteArrayColumnChunkReader)
	if !ok {
		return fmt.Errorf("%w: column %q reader is %T", loader.ErrColumn, b.name, cr)
	}
	vals := make([]parquet.ByteArray, parquetChunk)
	defs := make([]int16, parquetChunk)
	for read := int64(0); read < n; {
		total, nv, err := r.ReadBatch(min(parquetChunk, n-read), vals, defs, nil)
		if err != nil {
			return fmt.Errorf("%w: %w", loader.ErrCorrupt, err)
		}
		if total == 0 {
			return fmt.Errorf("%w: column %q ends after %d of %d rows", loader.ErrTruncated, b.name, read, n)
		}
		v := 0
		for _, d := range defs[:total] {
			isNull := d != maxDef || v == nv
			if !isNull {
				b.arena = append(b.arena, vals[v]...)
				v++
			}
			if isNull && b.null == nil {
				b.null = make([]bool, len(b.offs)-1)
			}
			if b.null != nil {
				b.null = append(b.null, isNull)
			}
			b.offs = append(b.offs, int64(len(b.arena)))
		}
		read += total
	}
	return nil
}

// readLabelSets appends a row group's n label sets, and each one's first
// class to labels. A row whose set is null or empty, or holds a null or
// negative class, fails naming the row.
func (p *source) readLabelSets(rg *file.RowGroupReader, col int, maxDef int16, n int64) error {
	cr, err := rg.Column(col)
	if err != nil {
		return fmt.Errorf("%w: %w", loader.ErrCorrupt, err)
	}
	defs, reps := make([]int16, parquetChunk), make([]int16, parquetChunk)
	v64, v32 := make([]int64, parquetChunk), make([]int32, parquetChunk)
	first := int64(len(p.labels)) // the row group's first row
	rows := int64(0)
	end := func() error { // closes the current row's set
		if rows == 0 {
			return nil
		}
		row := first + rows - 1
		if int64(len(p.sets)) == p.setEnds[len(p.setEnds)-1] {
			return fmt.Errorf("%w: row %d: label set is null or empty", loader.ErrLabel, row-p.starts[len(p.starts)-1])
		}
		p.labels = append(p.labels, p.sets[p.setEnds[len(p.setEnds)-1]])
		p.setEnds = append(p.setEnds, int64(len(p.sets)))
		return nil
	}
	for {
		var total int64
		var nv int
		switch r := cr.(type) {
		case *file.Int64ColumnChunkReader:
			total, nv, err = r.ReadBatch(parquetChunk, v64, defs, reps)
		case *file.Int32ColumnChunkReader:
			total, nv, err = r.ReadBatch(parquetChunk, v32, defs, reps)
			for i := range nv {
				v64[i] = int64(v32[i])
			}
		default:
			return fmt.Errorf("%w: label column reader is %T, want integers", loader.ErrColumn, cr)
		}
		if err != nil {
			return fmt.Errorf("%w: %w", loader.ErrCorrupt, err)
		}
		if total == 0 {
			break
		}
		v := 0
		for k := range total {
			if reps[k] == 0 {
				if err := end(); err != nil {
					return err
				}
				rows++
			}
			if defs[k] == maxDef && v < nv {
				c := v64[v]
				v++
				if c < 0 || c > 1<<31-1 {
					return fmt.Errorf("%w: row %d: class %d of the label set is negative or over int32", loader.ErrLabel, first+rows-1-p.starts[len(p.starts)-1], c)
				}
				p.sets = append(p.sets, int32(c))
			}
		}
	}
	if err := end(); err != nil {
		return err
	}
	if rows != n {
		return fmt.Errorf("%w: label column has %d rows of %d", loader.ErrTruncated, rows, n)
	}
	return nil
}

// FieldNames implements loader.FieldSource: fields= as given.
func (p *source) FieldNames() []string { return p.fieldNames }

// MultiLabel implements loader.FieldSource: the label column is a list.
func (p *source) MultiLabel() bool { return p.multi }

// AppendField implements loader.FieldSource: a copy of row i's cell from
// the arena read at open; a null cell is absent, one over maxfieldbytes=
// fails naming the file, row and column.
func (p *source) AppendField(dst []byte, i int64, f int) ([]byte, bool, error) {
	if i < 0 || i >= p.Len() {
		return dst, false, &loader.RecordError{File: p.path, Record: i, Err: loader.ErrIndex}
	}
	c := &p.fields[f]
	switch size := c.offs[i+1] - c.offs[i]; {
	case p.img.offs == nil:
		return dst, false, loader.ErrClosed
	case c.null != nil && c.null[i]:
		return dst, false, nil
	case size > p.maxField:
		file, row := p.Where(i)
		return dst, false, &loader.RecordError{File: file, Record: row,
			Err: fmt.Errorf("%w: field %q has %d bytes, maxfieldbytes=%d", loader.ErrFieldTooLarge, c.name, size, p.maxField)}
	}
	return append(dst, c.arena[c.offs[i]:c.offs[i+1]]...), true, nil
}

// AppendLabels implements loader.FieldSource: row i's label set.
func (p *source) AppendLabels(dst []int32, i int64) ([]int32, error) {
	if i < 0 || i >= p.Len() || !p.multi {
		return dst, &loader.RecordError{File: p.path, Record: i, Err: loader.ErrIndex}
	}
	return append(dst, p.sets[p.setEnds[i]:p.setEnds[i+1]]...), nil
}

var _ loader.FieldSource = (*source)(nil)
