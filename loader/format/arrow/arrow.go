package arrow

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/format/internal/options"
)

func init() {
	loader.RegisterFormat("arrow", func(spec string) (loader.Source, error) { return openAny(spec) })
}

// Schema metadata keys of a raw-pixel Arrow file, the contract between
// this reader and the files loaderd convert writes.
const (
	MetaShape   = "loaderd.shape"   // "H,W,C"
	MetaLayout  = "loaderd.layout"  // "hwc" (default) or "chw"
	MetaClasses = "loaderd.classes" // JSON array of class names
)

// source reads raw-pixel Arrow IPC files, mapped read-only and read with
// ipc.NewMappedFileReader, so Sample returns a view of the mapping: no
// decode, no copy, scratch unused. Labels are copied into one []int32 at
// open. It is safe for concurrent use. The file layout and the options
// are in the package documentation.
type source struct {
	mapped
	batches []arrowBatch // over all files, by start
	spec    augment.Spec
}

type arrowBatch struct {
	start int64  // dataset index of the batch's first row
	n     int64  // rows
	file  int32  // index in files
	row   int64  // row of the first sample within its file
	pix   []byte // n·bytes pixels, a view of the mapping
	valid []byte // validity bitmap of the pixel column, nil when no nulls
	voff  int64  // bit offset into valid
}

// open maps and indexes the raw-pixel files named by spec, "PATH[?OPTIONS]".
func open(spec string) (*source, error) {
	o, err := options.Parse("arrow", spec, "pixels", "label", "size")
	if err != nil {
		return nil, err
	}
	files, err := o.ShardFiles(".arrow")
	if err != nil {
		return nil, err
	}
	return openRaw(o, files, o.Str("pixels", "pixels"))
}

// openRaw maps and indexes raw-pixel files, pixels in column pixCol.
func openRaw(o *options.Options, files []string, pixCol string) (*source, error) {
	h, w, err := o.Size()
	if err != nil {
		return nil, err
	}
	a := &source{mapped: mapped{path: o.Path}}
	label := o.Str("label", "label")
	if err := a.mapAll(files, func(k int) error { return a.index(k, pixCol, label, h, w) }); err != nil {
		return nil, err
	}
	return a, nil
}

// index reads file k's schema and record batches. A malformed file can
// make the IPC reader panic; that is a corrupt file, not a crash.
func (a *source) index(k int, pixCol, labelCol string, h, w int) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: arrow reader panic: %v", loader.ErrCorrupt, r)
		}
	}()
	r, pi, li, err := openColumns(a.files[k].data, pixCol, labelCol)
	if err != nil {
		return err
	}
	defer r.Close()
	schema := r.Schema()
	spec, classes, err := arrowShape(schema, h, w)
	if err != nil {
		return err
	}
	if k == 0 {
		a.spec, a.classes = spec, classes
	} else if spec != a.spec || !equalStrings(classes, a.classes) {
		return fmt.Errorf("%w: shape %v and classes differ from %s's (%v)", loader.ErrCorrupt, spec, a.files[0].path, a.spec)
	}
	var row int64
	for b := range r.NumRecords() {
		rec, err := r.RecordBatchAt(b)
		if err != nil {
			return fmt.Errorf("%w: record batch %d: %w", loader.ErrCorrupt, b, err)
		}
		err = a.addBatch(k, row, rec.Column(pi), rec.Column(li))
		row += rec.NumRows()
		rec.Release()
		if err != nil {
			return fmt.Errorf("record batch %d: %w", b, err)
		}
	}
	return nil
}

// arrowShape reads the sample spec and classes from the metadata.
func arrowShape(s *arrow.Schema, h, w int) (augment.Spec, []string, error) {
	spec := augment.Spec{H: h, W: w, DType: sample.U8, Layout: sample.HWC}
	md := s.Metadata()
	if v, ok := md.GetValue(MetaShape); ok {
		var dims [3]int
		parts := strings.Split(v, ",")
		for i := range dims {
			if len(parts) != 3 {
				break
			}
			dims[i], _ = strconv.Atoi(strings.TrimSpace(parts[i]))
		}
		if dims[0] <= 0 || dims[1] <= 0 || dims[2] <= 0 || dims[0] > 1<<16 || dims[1] > 1<<16 || dims[2] > 4 {
			return spec, nil, fmt.Errorf("%w: metadata %s=%q: want H,W,C", loader.ErrCorrupt, MetaShape, v)
		}
		spec.H, spec.W, spec.C = dims[0], dims[1], dims[2]
	}
	if v, ok := md.GetValue(MetaLayout); ok {
		l, err := sample.ParseLayout(v)
		if err != nil {
			return spec, nil, fmt.Errorf("%w: metadata %s: %w", loader.ErrCorrupt, MetaLayout, err)
		}
		spec.Layout = l
	}
	var classes []string
	if v, ok := md.GetValue(MetaClasses); ok {
		if err := json.Unmarshal([]byte(v), &classes); err != nil {
			return spec, nil, fmt.Errorf("%w: metadata %s: %w", loader.ErrCorrupt, MetaClasses, err)
		}
	}
	return spec, classes, nil
}

// addBatch records a batch's pixel view and copies its labels.
func (a *source) addBatch(k int, row int64, pix, lab arrow.Array) error {
	n := int64(pix.Len())
	if int64(lab.Len()) != n {
		return fmt.Errorf("%w: %d pixel rows, %d labels", loader.ErrCorrupt, n, lab.Len())
	}
	width, values, err := pixelValues(pix)
	if err != nil {
		return err
	}
	if a.spec.H == 0 { // no shape anywhere: a square RGB image
		s := int(math.Sqrt(float64(width / 3)))
		if 3*s*s != width {
			return fmt.Errorf("%w: %d-byte pixel rows and no %s metadata or size= option", loader.ErrCorrupt, width, MetaShape)
		}
		a.spec.H, a.spec.W = s, s
	}
	if a.spec.C == 0 {
		a.spec.C = width / (a.spec.H * a.spec.W)
	}
	if width != a.spec.Bytes() || a.spec.Validate() != nil {
		return fmt.Errorf("%w: %d-byte pixel rows for shape %v", loader.ErrColumn, width, a.spec)
	}
	off := int64(pix.Data().Offset())
	if int64(len(values)) < (off+n)*int64(width) {
		return fmt.Errorf("%w: pixel buffer of %d bytes for %d rows", loader.ErrTruncated, len(values), n)
	}
	bt := arrowBatch{start: int64(len(a.labels)), n: n, file: int32(k), row: row,
		pix: values[off*int64(width) : (off+n)*int64(width)]}
	if pix.NullN() > 0 {
		bt.valid, bt.voff = pix.NullBitmapBytes(), off
	}
	if err := appendLabels(&a.labels, lab); err != nil {
		return err
	}
	a.batches = append(a.batches, bt)
	return nil
}

// pixelValues returns the byte width and the values buffer of a
// fixed_size_binary or fixed_size_list<uint8> column.
func pixelValues(col arrow.Array) (int, []byte, error) {
	switch c := col.(type) {
	case *array.FixedSizeBinary:
		bufs := c.Data().Buffers()
		if len(bufs) < 2 || bufs[1] == nil {
			return 0, nil, fmt.Errorf("%w: pixel column has no values", loader.ErrCorrupt)
		}
		return c.DataType().(*arrow.FixedSizeBinaryType).ByteWidth, bufs[1].Bytes(), nil
	case *array.FixedSizeList:
		// Null bytes can only sit under null rows (writers put them there);
		// a row's own validity is what Sample checks.
		v, ok := c.ListValues().(*array.Uint8)
		if !ok {
			return 0, nil, fmt.Errorf("%w: pixel column is %s, want fixed_size_binary or fixed_size_list<uint8>", loader.ErrColumn, col.DataType())
		}
		// The child's offset is in bytes; the list's own offset is added by the caller.
		width := int(c.DataType().(*arrow.FixedSizeListType).Len())
		return width, v.Uint8Values()[:v.Len()], nil
	}
	return 0, nil, fmt.Errorf("%w: pixel column is %s, want fixed_size_binary", loader.ErrColumn, col.DataType())
}

// appendLabels copies an integer column, -1 for nulls and values out of
// int32 range.
func appendLabels(dst *[]int32, col arrow.Array) error {
	n := col.Len()
	var get func(i int) int64
	switch c := col.(type) {
	case *array.Int8:
		get = func(i int) int64 { return int64(c.Value(i)) }
	case *array.Int16:
		get = func(i int) int64 { return int64(c.Value(i)) }
	case *array.Int32:
		get = func(i int) int64 { return int64(c.Value(i)) }
	case *array.Int64:
		get = func(i int) int64 { return c.Value(i) }
	case *array.Uint8:
		get = func(i int) int64 { return int64(c.Value(i)) }
	case *array.Uint16:
		get = func(i int) int64 { return int64(c.Value(i)) }
	case *array.Uint32:
		get = func(i int) int64 { return int64(c.Value(i)) }
	case *array.Uint64:
		get = func(i int) int64 { return int64(min(c.Value(i), math.MaxInt64)) }
	default:
		return fmt.Errorf("%w: label column is %s, want an integer type", loader.ErrColumn, col.DataType())
	}
	for i := range n {
		v := int64(-1)
		if col.IsValid(i) {
			v = get(i)
		}
		if v < 0 || v > math.MaxInt32 {
			v = -1
		}
		*dst = append(*dst, int32(v))
	}
	return nil
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Spec returns the shape from the metadata, U8.
func (a *source) Spec() augment.Spec { return a.spec }

// batch returns the record batch holding row i, 0 ≤ i < Len().
func (a *source) batch(i int64) *arrowBatch {
	k := sort.Search(len(a.batches), func(k int) bool { return a.batches[k].start > i }) - 1
	return &a.batches[k]
}

// Name returns row i's file and row in it, as FILE#ROW.
func (a *source) Name(i int64) string {
	b := a.batch(i)
	return a.files[b.file].path + "#" + strconv.FormatInt(b.row+i-b.start, 10)
}

// Sample returns a view of row i's pixels in the mapping; scratch is unused.
func (a *source) Sample(i int64, _ []byte) (int32, []byte, error) {
	if i < 0 || i >= a.Len() {
		return 0, nil, &loader.RecordError{File: a.path, Record: i, Err: loader.ErrIndex}
	}
	b := a.batch(i)
	j := i - b.start
	label := a.labels[i]
	switch {
	case a.files[b.file].data == nil:
		return 0, nil, &loader.RecordError{File: a.path, Record: i, Err: loader.ErrClosed}
	case b.valid != nil && b.valid[(b.voff+j)>>3]&(1<<((b.voff+j)&7)) == 0:
		return 0, nil, &loader.RecordError{File: a.files[b.file].path, Record: b.row + j, Err: fmt.Errorf("%w: null pixels", loader.ErrCorrupt)}
	case label < 0 || int(label) >= len(a.classes):
		return 0, nil, &loader.RecordError{File: a.files[b.file].path, Record: b.row + j, Err: fmt.Errorf("%w: null, negative or over %d classes", loader.ErrLabel, len(a.classes))}
	}
	n := int64(a.spec.Bytes())
	return label, b.pix[j*n : (j+1)*n : (j+1)*n], nil
}
