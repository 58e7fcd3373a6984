package convert

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
	loaderarrow "github.com/loaderd/loaderd/loader/format/arrow"
)

// DefaultBatchRows is the rows per record batch ArrowWriter writes:
// large enough that the per-batch metadata is noise, small enough that a
// batch's buffers (3 MiB of CIFAR pixels) stay modest.
const DefaultBatchRows = 1024

// ArrowWriter writes the raw-pixel Arrow IPC files that the arrow format
// (loader/format/arrow) reads:
// columns label (int32) and pixels (fixed_size_binary[spec.Bytes()]),
// shape, layout and classes in the schema metadata, no compression (so the
// reader can map the pixels in place). Rows are buffered and written as
// record batches of BatchRows. It is not safe for concurrent use.
type ArrowWriter struct {
	fw     *ipc.FileWriter
	schema *arrow.Schema
	width  int
	rows   int
	pix    []byte
	labels []int32
	n      int64
}

// NewArrowWriter starts an Arrow file on w for samples of spec (U8).
// batchRows ≤ 0 means DefaultBatchRows.
func NewArrowWriter(w io.Writer, spec augment.Spec, classes []string, batchRows int) (*ArrowWriter, error) {
	if err := spec.Validate(); err != nil || spec.DType != sample.U8 {
		return nil, fmt.Errorf("convert: arrow writer: spec %v: want a valid u8 image", spec)
	}
	if batchRows <= 0 {
		batchRows = DefaultBatchRows
	}
	cls, err := json.Marshal(classes)
	if err != nil {
		return nil, fmt.Errorf("convert: arrow writer: %w", err)
	}
	md := arrow.NewMetadata(
		[]string{loaderarrow.MetaShape, loaderarrow.MetaLayout, loaderarrow.MetaClasses},
		[]string{strconv.Itoa(spec.H) + "," + strconv.Itoa(spec.W) + "," + strconv.Itoa(spec.C), spec.Layout.String(), string(cls)})
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "label", Type: arrow.PrimitiveTypes.Int32},
		{Name: "pixels", Type: &arrow.FixedSizeBinaryType{ByteWidth: spec.Bytes()}},
	}, &md)
	fw, err := ipc.NewFileWriter(w, ipc.WithSchema(schema))
	if err != nil {
		return nil, fmt.Errorf("convert: arrow writer: %w", err)
	}
	return &ArrowWriter{fw: fw, schema: schema, width: spec.Bytes(), rows: batchRows,
		pix: make([]byte, 0, batchRows*spec.Bytes()), labels: make([]int32, 0, batchRows)}, nil
}

// Write appends one sample; pix must be spec.Bytes() long.
func (w *ArrowWriter) Write(label int32, pix []byte) error {
	if len(pix) != w.width {
		return fmt.Errorf("convert: arrow writer: %d pixel bytes, want %d", len(pix), w.width)
	}
	w.pix = append(w.pix, pix...)
	w.labels = append(w.labels, label)
	w.n++
	if len(w.labels) == w.rows {
		return w.flush()
	}
	return nil
}

// Rows returns the number of samples written so far.
func (w *ArrowWriter) Rows() int64 { return w.n }

// flush writes the buffered rows as one record batch; the arrays are
// views of the buffers, which the IPC writer copies out before returning.
func (w *ArrowWriter) flush() error {
	n := len(w.labels)
	if n == 0 {
		return nil
	}
	lab := array.NewInt32Data(array.NewData(arrow.PrimitiveTypes.Int32, n,
		[]*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(w.labels))}, nil, 0, 0))
	pix := array.NewFixedSizeBinaryData(array.NewData(w.schema.Field(1).Type, n,
		[]*memory.Buffer{nil, memory.NewBufferBytes(w.pix)}, nil, 0, 0))
	rec := array.NewRecordBatch(w.schema, []arrow.Array{lab, pix}, int64(n))
	err := w.fw.Write(rec)
	rec.Release()
	lab.Release()
	pix.Release()
	w.pix, w.labels = w.pix[:0], w.labels[:0]
	if err != nil {
		return fmt.Errorf("convert: arrow writer: %w", err)
	}
	return nil
}

// Close writes the last batch and the file footer. It does not close the
// underlying writer.
func (w *ArrowWriter) Close() error {
	if err := w.flush(); err != nil {
		w.fw.Close()
		return err
	}
	if err := w.fw.Close(); err != nil {
		return fmt.Errorf("convert: arrow writer: %w", err)
	}
	return nil
}
