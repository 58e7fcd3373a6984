package arrow

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/format/internal/mmap"
	"github.com/loaderd/loaderd/loader/format/internal/options"
	"github.com/loaderd/loaderd/loader/imagedec"
)

// Files whose image column holds encoded images (JPEG, PNG, …: binary,
// large_binary, or Hugging Face's struct<bytes: binary, path: string>)
// are read as the tar format reads its members: each sample is a view of
// the mapping, decoded by loader/imagedec into the worker's scratch, at a
// fixed size (size=WxH, else the first image's) or, with size=any, at
// its own (a loader.SizedSource).

// encodedKeys are the options only encoded images take.
var encodedKeys = []string{"image", "maxpixels", "resize", "maxbytes", "decoder", "exact", "fields", "maxfieldbytes"}

// openAny opens the files named by spec as raw pixels or as encoded
// images, as the first file's image column's type says.
func openAny(spec string) (loader.Source, error) {
	o, err := options.Parse("arrow", spec, append([]string{"pixels", "label", "size"}, encodedKeys...)...)
	if err != nil {
		return nil, err
	}
	if o.Get("pixels") != "" && o.Get("image") != "" {
		return nil, o.Errorf("pixels= and image= name the same column; give one")
	}
	files, err := o.ShardFiles(".arrow")
	if err != nil {
		return nil, err
	}
	col, typ, err := imageColumn(files[0], o.Str("pixels", o.Get("image")))
	if err != nil {
		return nil, &loader.RecordError{File: files[0], Record: -1, Err: err}
	}
	encOpt := "" // the first option only encoded images take
	if o.AnySize() {
		encOpt = "size=any"
	}
	for _, k := range encodedKeys {
		if encOpt == "" && o.Get(k) != "" {
			encOpt = k + "="
		}
	}
	switch {
	case encodedType(typ), typ == nil && encOpt != "": // (no such column: the opener names it)
		return openEncoded(o, files, col)
	case typ != nil && encOpt != "":
		return nil, o.Errorf("%s applies to encoded images, and column %q holds raw pixels of one size (%s); "+
			"size=any needs a column of JPEG or PNG files (binary, or struct<bytes: binary, path: string>)", encOpt, col, typ)
	}
	return openRaw(o, files, col)
}

// imageColumn reads a file's schema and returns the image column, named
// or else the first of pixels, image and img there is, and its type (nil
// when there is none: the open then names the column missing).
func imageColumn(name, named string) (col string, typ arrow.DataType, err error) {
	data, err := mmap.Map(name)
	if err != nil {
		return "", nil, err
	}
	defer mmap.Unmap(data)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: arrow reader panic: %v", loader.ErrCorrupt, r)
		}
	}()
	if err := verifyArrowFooter(data); err != nil {
		return "", nil, err
	}
	r, err := ipc.NewMappedFileReader(data)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %w", loader.ErrCorrupt, err)
	}
	defer r.Close()
	cands := []string{named}
	if named == "" {
		cands = []string{"pixels", "image", "img"}
	}
	for _, c := range cands {
		if f, ok := r.Schema().FieldsByName(c); ok && len(f) == 1 {
			return c, f[0].Type, nil
		}
	}
	return cands[0], nil, nil
}

// encodedType reports whether t holds encoded images.
func encodedType(t arrow.DataType) bool {
	switch t := t.(type) {
	case *arrow.BinaryType, *arrow.LargeBinaryType:
		return true
	case *arrow.StructType:
		if k, ok := t.FieldIdx("bytes"); ok {
			return encodedType(t.Field(k).Type)
		}
	}
	return false
}

// encSource reads Arrow files of encoded images. Files are mapped
// read-only; each batch's image bytes are a view of the mapping, its
// offsets copied and checked at open, so a sample reads nothing and
// trusts no offset it has not checked. The embedded imagedec.Source
// decodes, reading encSource as its imagedec.Records. It is safe for
// concurrent use.
type encSource struct {
	*imagedec.Source
	mapped
	batches []encBatch // over all files, by start

	// fields=, maxfieldbytes= and a list label column (fields.go).
	fieldNames []string
	maxField   int64
	multi      bool
	named      bool // the metadata named the classes
	sets       labelSets
}

type encBatch struct {
	start  int64    // dataset index of the batch's first row
	n      int64    // rows
	file   int32    // index in files
	row    int64    // row of the first sample within its file
	values []byte   // the column's values, a view of the mapping
	offs   []int64  // row j is values[offs[j]:offs[j+1]]
	null   []bool   // row j is null; nil when none is
	fields []binCol // the fields= columns, by field
}

// openEncoded maps and indexes files of encoded images in column col.
func openEncoded(o *options.Options, files []string, col string) (*encSource, error) {
	opt, err := o.Images()
	if err != nil {
		return nil, err
	}
	a := &encSource{mapped: mapped{path: o.Path}}
	if a.fieldNames, a.maxField, err = o.Fields(); err != nil {
		return nil, err
	}
	label := o.Str("label", "label")
	if err := a.mapAll(files, func(k int) error { return a.index(k, col, label) }); err != nil {
		return nil, err
	}
	if a.multi {
		if a.classes, err = a.sets.classes(a.classes, a.named); err != nil {
			a.Close()
			return nil, &loader.RecordError{File: o.Path, Record: -1, Err: err}
		}
	}
	if a.Source, err = imagedec.NewSource(a, opt); err != nil { // without size=, probes the first images
		a.Close()
		return nil, err
	}
	return a, nil
}

// index reads file k's schema and record batches; a malformed file can
// make the IPC reader panic, which is a corrupt file, not a crash.
func (a *encSource) index(k int, imgCol, labelCol string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: arrow reader panic: %v", loader.ErrCorrupt, r)
		}
	}()
	r, ii, li, err := openColumns(a.files[k].data, imgCol, labelCol)
	if err != nil {
		return err
	}
	defer r.Close()
	schema := r.Schema()
	var classes []string
	if v, ok := schema.Metadata().GetValue(MetaClasses); ok {
		if err := json.Unmarshal([]byte(v), &classes); err != nil {
			return fmt.Errorf("%w: metadata %s: %w", loader.ErrCorrupt, MetaClasses, err)
		}
	}
	if k == 0 {
		a.classes, a.named = classes, classes != nil
		a.multi = isList(schema.Field(li).Type)
	} else if !equalStrings(classes, a.classes) {
		return fmt.Errorf("%w: classes differ from %s's", loader.ErrCorrupt, a.files[0].path)
	}
	var row int64
	for b := range r.NumRecords() {
		rec, err := r.RecordBatchAt(b)
		if err != nil {
			return fmt.Errorf("%w: record batch %d: %w", loader.ErrCorrupt, b, err)
		}
		err = a.addBatch(k, row, rec.Column(ii), rec.Column(li))
		if err == nil {
			err = a.addFields(schema, rec, row)
		}
		row += rec.NumRows()
		rec.Release()
		if err != nil {
			return fmt.Errorf("record batch %d: %w", b, err)
		}
	}
	return nil
}

// addBatch records a batch's image bytes and offsets, and copies its labels.
func (a *encSource) addBatch(k int, row int64, img, lab arrow.Array) error {
	n := int64(img.Len())
	if int64(lab.Len()) != n {
		return fmt.Errorf("%w: %d image rows, %d labels", loader.ErrCorrupt, n, lab.Len())
	}
	bt := encBatch{start: int64(len(a.labels)), n: n, file: int32(k), row: row}
	col := img
	if s, ok := img.(*array.Struct); ok {
		f, _ := s.DataType().(*arrow.StructType).FieldIdx("bytes")
		col = s.Field(f) // sliced to the struct's rows
	}
	switch c := col.(type) {
	case *array.Binary:
		if n == 0 { // no offsets to read: an empty array may have none
			break
		}
		for _, o := range c.ValueOffsets() {
			bt.offs = append(bt.offs, int64(o))
		}
	case *array.LargeBinary:
		if n > 0 {
			bt.offs = append(bt.offs, c.ValueOffsets()...)
		}
	default:
		return fmt.Errorf("%w: image column is %s, want binary or struct<bytes: binary>", loader.ErrColumn, img.DataType())
	}
	if n == 0 {
		bt.offs = []int64{0}
	}
	if bufs := col.Data().Buffers(); len(bufs) > 2 && bufs[2] != nil {
		bt.values = bufs[2].Bytes()
	}
	if int64(len(bt.offs)) != n+1 || bt.offs[0] < 0 || bt.offs[n] > int64(len(bt.values)) {
		return fmt.Errorf("%w: image offsets outside the column's %d bytes", loader.ErrCorrupt, len(bt.values))
	}
	for j := range n {
		if bt.offs[j] > bt.offs[j+1] {
			return fmt.Errorf("%w: image offsets decrease at row %d", loader.ErrCorrupt, row+j)
		}
		if img.IsNull(int(j)) || col.IsNull(int(j)) {
			if bt.null == nil {
				bt.null = make([]bool, n)
			}
			bt.null[j] = true
		}
	}
	var err error
	if a.multi {
		err = a.sets.add(&a.labels, lab, row)
	} else {
		err = appendLabels(&a.labels, lab)
	}
	if err != nil {
		return err
	}
	a.batches = append(a.batches, bt)
	return nil
}

// batch returns the batch holding row i, 0 ≤ i < Len(), and i's row in it.
func (a *encSource) batch(i int64) (*encBatch, int64) {
	k := sort.Search(len(a.batches), func(k int) bool { return a.batches[k].start > i }) - 1
	return &a.batches[k], i - a.batches[k].start
}

// The methods both embedded types have are ambiguous, and spelled out:
// Len, Classes and Close are mapped's and, with LabelOf, Where, SizeOf and
// Encoded, make encSource the imagedec.Records its Source reads; Label
// and String are the Source's.

// Label implements loader.Labeler: the Source's.
func (a *encSource) Label(i int64) (int32, error) { return a.Source.Label(i) }

// String names the source as arrow:PATH.
func (a *encSource) String() string { return a.Source.String() }

// Len implements imagedec.Records (and loader.Source): the rows.
func (a *encSource) Len() int64 { return a.mapped.Len() }

// Classes implements imagedec.Records (and loader.Source).
func (a *encSource) Classes() []string { return a.mapped.Classes() }

// Close implements imagedec.Records (and loader.Source): it unmaps the
// files.
func (a *encSource) Close() error { return a.mapped.Close() }

// LabelOf implements imagedec.Records.
func (a *encSource) LabelOf(i int64) int32 { return a.labels[i] }

// Where implements imagedec.Records: row i's file and its row there.
func (a *encSource) Where(i int64) (string, int64) {
	b, j := a.batch(i)
	return a.files[b.file].path, b.row + j
}

// SizeOf implements imagedec.Records: the image's bytes in the column
// (-1 once closed: Encoded says so).
func (a *encSource) SizeOf(i int64) int64 {
	b, j := a.batch(i)
	if a.files[b.file].data == nil {
		return -1
	}
	return b.offs[j+1] - b.offs[j]
}

// Encoded implements imagedec.Records: row i's image, a view of the
// mapping valid until Close; a null one is imagedec.ErrNull.
func (a *encSource) Encoded(i int64) ([]byte, imagedec.Hold, error) {
	b, j := a.batch(i)
	switch {
	case a.files[b.file].data == nil:
		return nil, nil, loader.ErrClosed
	case b.null != nil && b.null[j]:
		return nil, nil, imagedec.ErrNull
	}
	return b.values[b.offs[j]:b.offs[j+1]:b.offs[j+1]], nil, nil
}

var (
	_ imagedec.Records   = (*encSource)(nil)
	_ loader.SizedSource = (*encSource)(nil)
)
