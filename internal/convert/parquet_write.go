package convert

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/schema"
)

// ParquetWriter writes image datasets in the Hugging Face layout that the
// parquet format (loader/format/parquet) reads: IMAGE: struct<bytes:
// binary, path: string> and LABEL: int64, every field nullable as pyarrow
// writes them, Snappy pages, and the "huggingface" metadata naming the
// classes. Rows are buffered into row groups. It is not safe for
// concurrent use.
//
// Run does not use it (convert writes Arrow): it writes the parquet
// format's test files and fixtures (loader/testdata/formats/gen.go), and
// lives here beside ArrowWriter so that the formats' packages import no
// writer.
type ParquetWriter struct {
	fw     *file.Writer
	rows   int
	images [][]byte
	paths  []string
	labels []int64
}

// DefaultParquetRowGroup is the rows per row group ParquetWriter writes.
const DefaultParquetRowGroup = 1000

// NewParquetWriter starts a file on w with the given column names (e.g.
// "img" and "label") and classes. rowGroup ≤ 0 means DefaultParquetRowGroup.
func NewParquetWriter(w io.Writer, imageCol, labelCol string, classes []string, rowGroup int) (*ParquetWriter, error) {
	if rowGroup <= 0 {
		rowGroup = DefaultParquetRowGroup
	}
	bytesNode := schema.NewByteArrayNode("bytes", parquet.Repetitions.Optional, -1)
	pathNode, err := schema.NewPrimitiveNodeLogical("path", parquet.Repetitions.Optional, schema.StringLogicalType{}, parquet.Types.ByteArray, -1, -1)
	if err != nil {
		return nil, fmt.Errorf("convert: parquet writer: %w", err)
	}
	img, err := schema.NewGroupNode(imageCol, parquet.Repetitions.Optional, schema.FieldList{bytesNode, pathNode}, -1)
	if err != nil {
		return nil, fmt.Errorf("convert: parquet writer: %w", err)
	}
	root, err := schema.NewGroupNode("schema", parquet.Repetitions.Required,
		schema.FieldList{img, schema.NewInt64Node(labelCol, parquet.Repetitions.Optional, -1)}, -1)
	if err != nil {
		return nil, fmt.Errorf("convert: parquet writer: %w", err)
	}
	type feature struct {
		Type  string   `json:"_type"`
		Names []string `json:"names,omitempty"`
	}
	hf, err := json.Marshal(map[string]any{"info": map[string]any{"features": map[string]feature{
		imageCol: {Type: "Image"}, labelCol: {Type: "ClassLabel", Names: classes}}}})
	if err != nil {
		return nil, fmt.Errorf("convert: parquet writer: %w", err)
	}
	md := metadata.NewKeyValueMetadata()
	if err := md.Append("huggingface", string(hf)); err != nil {
		return nil, fmt.Errorf("convert: parquet writer: %w", err)
	}
	fw, err := file.NewParquetWriterWithError(w, root, file.WithWriteMetadata(md),
		file.WithWriterProps(parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy))))
	if err != nil {
		return nil, fmt.Errorf("convert: parquet writer: %w", err)
	}
	return &ParquetWriter{fw: fw, rows: rowGroup}, nil
}

// Write appends a row: an encoded image, its path ("" writes a null path,
// as for images held in memory) and its label. A nil image or a negative
// label is written as null, for tests of what readers do with them.
func (w *ParquetWriter) Write(image []byte, path string, label int64) error {
	w.images = append(w.images, image)
	w.paths = append(w.paths, path)
	w.labels = append(w.labels, label)
	if len(w.labels) == w.rows {
		return w.flush()
	}
	return nil
}

func (w *ParquetWriter) flush() (err error) {
	n := len(w.labels)
	if n == 0 {
		return nil
	}
	defer func() {
		if r := recover(); r != nil { // the column writers panic on misuse
			err = fmt.Errorf("convert: parquet writer: %v", r)
		}
	}()
	rg, err := w.fw.AppendRowGroupChecked()
	if err != nil {
		return fmt.Errorf("convert: parquet writer: %w", err)
	}
	var imgs, paths []parquet.ByteArray
	imgDefs, pathDefs, labDefs := make([]int16, n), make([]int16, n), make([]int16, n)
	var labels []int64
	for i := range n {
		imgDefs[i], pathDefs[i] = 1, 1 // the struct is there, its field null
		if w.images[i] != nil {
			imgs, imgDefs[i] = append(imgs, w.images[i]), 2
		}
		if w.paths[i] != "" {
			paths, pathDefs[i] = append(paths, parquet.ByteArray(w.paths[i])), 2
		}
		if w.labels[i] >= 0 {
			labels, labDefs[i] = append(labels, w.labels[i]), 1
		}
	}
	cols := []func(file.ColumnChunkWriter) error{
		func(c file.ColumnChunkWriter) error {
			_, err := c.(*file.ByteArrayColumnChunkWriter).WriteBatch(imgs, imgDefs, nil)
			return err
		},
		func(c file.ColumnChunkWriter) error {
			_, err := c.(*file.ByteArrayColumnChunkWriter).WriteBatch(paths, pathDefs, nil)
			return err
		},
		func(c file.ColumnChunkWriter) error {
			_, err := c.(*file.Int64ColumnChunkWriter).WriteBatch(labels, labDefs, nil)
			return err
		},
	}
	for _, write := range cols {
		cw, err := rg.NextColumn()
		if err == nil {
			err = write(cw)
		}
		if err != nil {
			return fmt.Errorf("convert: parquet writer: %w", err)
		}
	}
	if err := rg.Close(); err != nil {
		return fmt.Errorf("convert: parquet writer: %w", err)
	}
	w.images, w.paths, w.labels = w.images[:0], w.paths[:0], w.labels[:0]
	return nil
}

// Close writes the last row group and the footer, and closes w if it is
// an io.Closer (the parquet library does).
func (w *ParquetWriter) Close() error {
	if err := w.flush(); err != nil {
		return err
	}
	if err := w.fw.Close(); err != nil {
		return fmt.Errorf("convert: parquet writer: %w", err)
	}
	return nil
}
