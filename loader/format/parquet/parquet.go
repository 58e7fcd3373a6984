package parquet

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/format/internal/mmap"
	"github.com/loaderd/loaderd/loader/format/internal/options"
	"github.com/loaderd/loaderd/loader/imagedec"
)

func init() {
	loader.RegisterFormat("parquet", func(spec string) (loader.Source, error) { return open(spec) })
}

// source reads image datasets as Hugging Face datasets stores them.
// Parquet pages are compressed and cannot be sliced per row, so at open
// the encoded images are read once into one in-memory arena (about the
// files' size); the embedded imagedec.Source decodes from it into the
// worker's scratch, reading the source as its imagedec.Records. It is
// safe for concurrent use. The layout and the options are in the package
// documentation.
type source struct {
	*imagedec.Source
	path    string
	files   []string
	starts  []int64 // dataset index of each file's first row
	img     byteCol // the encoded images: image i is img.arena[img.offs[i]:img.offs[i+1]]
	labels  []int32 // -1 when null or out of range
	classes []string

	fileDigests []fileDigest // per file, for DigestRecords

	// fields=, maxfieldbytes= and a list label column (fields.go).
	fieldNames []string
	maxField   int64
	fields     []byteCol
	multi      bool
	sets       []int32 // label sets, back to back
	setEnds    []int64 // row i's set is sets[setEnds[i]:setEnds[i+1]]
}

// open reads the files named by spec, "PATH[?OPTIONS]".
func open(spec string) (*source, error) {
	o, err := options.Parse("parquet", spec, "image", "label", "size", "maxpixels", "resize", "maxbytes", "decoder", "exact", "fields", "maxfieldbytes")
	if err != nil {
		return nil, err
	}
	opt, err := o.Images()
	if err != nil {
		return nil, err
	}
	files, err := o.ShardFiles(".parquet")
	if err != nil {
		return nil, err
	}
	p := &source{path: o.Path, files: files, img: byteCol{name: "image", offs: []int64{0}}, setEnds: []int64{0}}
	if p.fieldNames, p.maxField, err = o.Fields(); err != nil {
		return nil, err
	}
	for _, n := range p.fieldNames {
		p.fields = append(p.fields, byteCol{name: n, offs: []int64{0}})
	}
	for _, name := range files {
		p.starts = append(p.starts, int64(len(p.labels)))
		if err := p.read(name, o.Get("image"), o.Str("label", "label")); err != nil {
			return nil, &loader.RecordError{File: name, Record: -1, Err: err}
		}
	}
	if len(p.labels) == 0 {
		return nil, &loader.RecordError{File: o.Path, Record: -1, Err: fmt.Errorf("%w: no rows", loader.ErrTruncated)}
	}
	if p.classes == nil {
		hi := int32(-1)
		for _, l := range p.labels {
			hi = max(hi, l)
		}
		for _, l := range p.sets {
			hi = max(hi, l)
		}
		for i := range hi + 1 {
			p.classes = append(p.classes, strconv.Itoa(int(i)))
		}
	}
	if p.Source, err = imagedec.NewSource(p, opt); err != nil { // without size=, probes the first images
		return nil, err
	}
	return p, nil
}

// read appends one file's images and labels.
func (p *source) read(name, imageCol, labelCol string) error {
	data, err := mmap.Map(name)
	if err != nil {
		return err
	}
	defer mmap.Unmap(data)
	if err := p.readData(data, imageCol, labelCol); err != nil {
		return err
	}
	p.fileDigests = append(p.fileDigests, digestFile(name, data))
	return nil
}

// readData reads a whole parquet file held in data. The parquet reader may
// panic on a malformed file: that is a corrupt file, not a crash.
func (p *source) readData(data []byte, imageCol, labelCol string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: parquet reader panic: %v", loader.ErrCorrupt, r)
		}
	}()
	r, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%w: %w", loader.ErrCorrupt, err)
	}
	defer r.Close()
	sc := r.MetaData().Schema
	img, lab, err := parquetColumns(sc, imageCol, labelCol)
	if err != nil {
		return err
	}
	multi := sc.Column(lab).MaxRepetitionLevel() == 1
	if len(p.labels) == 0 {
		p.multi = multi
	} else if multi != p.multi {
		return fmt.Errorf("%w: label column %s is a list in one file and not in another", loader.ErrColumn, labelCol)
	}
	fcols, err := fieldColumns(sc, p.fieldNames)
	if err != nil {
		return err
	}
	if p.classes == nil && len(p.labels) == 0 {
		p.classes = hfClassNames(r.MetaData().KeyValueMetadata().FindValue("huggingface"), sc.Column(lab).ColumnPath()[0])
	}
	for g := range r.NumRowGroups() {
		rg := r.RowGroup(g)
		n := rg.NumRows()
		before := len(p.labels)
		if err := p.img.read(rg, img, sc.Column(img).MaxDefinitionLevel(), n); err != nil {
			return fmt.Errorf("row group %d: %w", g, err)
		}
		readLabels := p.readLabels
		if multi {
			readLabels = p.readLabelSets
		}
		if err := readLabels(rg, lab, sc.Column(lab).MaxDefinitionLevel(), n); err != nil {
			return fmt.Errorf("row group %d: %w", g, err)
		}
		for f, c := range fcols {
			if err := p.fields[f].read(rg, c, sc.Column(c).MaxDefinitionLevel(), n); err != nil {
				return fmt.Errorf("row group %d: %w", g, err)
			}
		}
		if len(p.labels)-before != int(n) || len(p.img.offs)-1 != len(p.labels) {
			return fmt.Errorf("%w: row group %d: %d rows, read %d labels and %d images", loader.ErrCorrupt, g, n, len(p.labels)-before, len(p.img.offs)-1-before)
		}
	}
	return nil
}

// parquetColumns finds the leaf columns of the image bytes and the label.
func parquetColumns(sc *schema.Schema, imageCol, labelCol string) (img, lab int, err error) {
	img = -1
	cands := []string{imageCol}
	if imageCol == "" {
		cands = []string{"img", "image"}
	}
	for _, c := range cands {
		for _, leaf := range []string{c + ".bytes", c} {
			if i := sc.ColumnIndexByName(leaf); i >= 0 && img < 0 {
				img = i
			}
		}
	}
	lab = sc.ColumnIndexByName(labelCol)
	if lab < 0 {
		lab = listLabelColumn(sc, labelCol)
	}
	switch {
	case img < 0:
		return 0, 0, fmt.Errorf("%w: no image column %v (struct<bytes, path> or binary) in schema %s", loader.ErrColumn, cands, schemaNames(sc))
	case sc.Column(img).PhysicalType() != parquet.Types.ByteArray || sc.Column(img).MaxRepetitionLevel() != 0:
		return 0, 0, fmt.Errorf("%w: image column %s is %s, want binary", loader.ErrColumn, sc.Column(img).Path(), sc.Column(img).PhysicalType())
	case lab < 0:
		return 0, 0, fmt.Errorf("%w: no label column %q in schema %s", loader.ErrColumn, labelCol, schemaNames(sc))
	case sc.Column(lab).MaxRepetitionLevel() > 1 || sc.Column(lab).PhysicalType() != parquet.Types.Int64 && sc.Column(lab).PhysicalType() != parquet.Types.Int32:
		return 0, 0, fmt.Errorf("%w: label column %s is %s, want an integer", loader.ErrColumn, labelCol, sc.Column(lab).PhysicalType())
	}
	return img, lab, nil
}

func schemaNames(sc *schema.Schema) []string {
	var out []string
	for i := range sc.NumColumns() {
		out = append(out, sc.Column(i).Path())
	}
	return out
}

// hfClassNames reads features.LABEL.names from the "huggingface" metadata.
func hfClassNames(md *string, label string) []string {
	if md == nil {
		return nil
	}
	var v struct {
		Info struct {
			Features map[string]struct {
				Names []string `json:"names"`
			} `json:"features"`
		} `json:"info"`
	}
	if json.Unmarshal([]byte(*md), &v) != nil {
		return nil
	}
	return v.Info.Features[label].Names
}

const parquetChunk = 256

func (p *source) readLabels(rg *file.RowGroupReader, col int, maxDef int16, n int64) error {
	cr, err := rg.Column(col)
	if err != nil {
		return fmt.Errorf("%w: %w", loader.ErrCorrupt, err)
	}
	defs := make([]int16, parquetChunk)
	v64 := make([]int64, parquetChunk)
	v32 := make([]int32, parquetChunk)
	for read := int64(0); read < n; {
		var total int64
		var nv int
		switch r := cr.(type) {
		case *file.Int64ColumnChunkReader:
			total, nv, err = r.ReadBatch(min(parquetChunk, n-read), v64, defs, nil)
		case *file.Int32ColumnChunkReader:
			total, nv, err = r.ReadBatch(min(parquetChunk, n-read), v32, defs, nil)
			for i := range nv {
				v64[i] = int64(v32[i])
			}
		default:
			return fmt.Errorf("%w: label column reader is %T", loader.ErrColumn, cr)
		}
		if err != nil {
			return fmt.Errorf("%w: %w", loader.ErrCorrupt, err)
		}
		if total == 0 {
			return fmt.Errorf("%w: label column ends after %d of %d rows", loader.ErrTruncated, read, n)
		}
		v := 0
		for _, d := range defs[:total] {
			l := int64(-1)
			if d == maxDef && v < nv {
				l = v64[v]
				v++
			}
			if l < 0 || l > 1<<31-1 {
				l = -1
			}
			p.labels = append(p.labels, int32(l))
		}
		read += total
	}
	return nil
}

// file returns the index of the file holding row i.
func (p *source) file(i int64) int {
	return sort.Search(len(p.starts), func(k int) bool { return p.starts[k] > i }) - 1
}

// Len implements imagedec.Records (and loader.Source): the rows of all
// files.
func (p *source) Len() int64 { return int64(len(p.labels)) }

// Classes implements imagedec.Records (and loader.Source).
func (p *source) Classes() []string { return p.classes }

// LabelOf implements imagedec.Records.
func (p *source) LabelOf(i int64) int32 { return p.labels[i] }

// Where implements imagedec.Records: row i's file and its row there.
func (p *source) Where(i int64) (string, int64) {
	k := p.file(i)
	return p.files[k], i - p.starts[k]
}

// SizeOf implements imagedec.Records: the image's bytes in the arena
// (-1 once closed: Encoded says so).
func (p *source) SizeOf(i int64) int64 {
	if p.img.offs == nil {
		return -1
	}
	return p.img.offs[i+1] - p.img.offs[i]
}

// Encoded implements imagedec.Records: row i's image, a view of the
// arena; a null one is imagedec.ErrNull.
func (p *source) Encoded(i int64) ([]byte, imagedec.Hold, error) {
	switch {
	case p.img.offs == nil:
		return nil, nil, loader.ErrClosed
	case p.img.null != nil && p.img.null[i]:
		return nil, nil, imagedec.ErrNull
	}
	return p.img.arena[p.img.offs[i]:p.img.offs[i+1]], nil, nil
}

// Close implements imagedec.Records (and loader.Source): it releases the
// arena.
func (p *source) Close() error {
	p.img.arena, p.img.offs = nil, nil
	return nil
}

var (
	_ imagedec.Records   = (*source)(nil)
	_ loader.SizedSource = (*source)(nil)
)
