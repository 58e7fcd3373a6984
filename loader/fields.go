package loader

import (
	"errors"
	"fmt"
	"hash"
)

// FieldSource is implemented by sources that carry more per sample than an
// image and one class: extra fields (a WebDataset sample's .txt and .json
// members, an Arrow or Parquet row's other columns), passed through to the
// clients as bytes the user decodes, and multi-label targets (a sample of
// several classes). The loader reads them right after the sample's image,
// into buffers the batch keeps (see Batch.Field, Batch.LabelSet), so a
// source reads them where it reads the image: a slice of the same mapping,
// no second pass over a file.
type FieldSource interface {
	// FieldNames names the extra fields, in the order of Fields' f, as the
	// dataset's fields= option lists them; empty for none.
	FieldNames() []string
	// AppendField appends field f of sample i to dst and reports whether
	// the sample has it: a sample without it appends nothing and is
	// present=false, not an error, as WebDataset's readers leave a missing
	// key out of the sample. A field over the source's bound is an error
	// (ErrFieldTooLarge) naming the sample and the field.
	AppendField(dst []byte, i int64, f int) (out []byte, present bool, err error)
	// MultiLabel reports whether samples have label sets (AppendLabels);
	// then Sample's label is the set's first class, or -1 for an empty set.
	MultiLabel() bool
	// AppendLabels appends sample i's classes, each in [0, len(Classes())),
	// to dst. Only called when MultiLabel.
	AppendLabels(dst []int32, i int64) ([]int32, error)
}

// ErrFieldTooLarge reports an extra field over the dataset's maxfieldbytes=.
var ErrFieldTooLarge = errors.New("field larger than maxfieldbytes")

// DefaultMaxFieldBytes bounds one extra field of one sample, unless the
// dataset says maxfieldbytes=: fields are captions and metadata, and a
// batch holds batch size × fields of them in memory and on the wire.
const DefaultMaxFieldBytes = 64 << 10

// MaxBatchFieldBytes bounds the extra fields of one batch, all fields of
// all samples: they travel in the batch's message beside an inline
// tensor, and client/wire's MaxMessageSize has room for this much more.
// A batch over it fails, naming its size, whichever samples made it.
const MaxBatchFieldBytes = 64 << 20

// FieldNamesOf returns src's extra field names, nil for none.
func FieldNamesOf(src Source) []string {
	if fs, ok := As[FieldSource](src); ok {
		return fs.FieldNames()
	}
	return nil
}

// MultiLabelOf reports whether src's samples have label sets.
func MultiLabelOf(src Source) bool {
	fs, ok := As[FieldSource](src)
	return ok && fs.MultiLabel()
}

// digestFields adds to a fingerprint the extra field names and the label
// sets of a source that has them, so that daemons serving other fields or
// classes of the same images do not pass for the same dataset; a source
// without them hashes nothing, keeping its fingerprint. The fields' bytes
// are not read: as for the images, the format's Digester stands for them.
func digestFields(h hash.Hash, src Source) error {
	fs, ok := As[FieldSource](src)
	if !ok || len(fs.FieldNames()) == 0 && !fs.MultiLabel() {
		return nil
	}
	DigestString(h, "fields")
	DigestInt(h, int64(len(fs.FieldNames())))
	for _, n := range fs.FieldNames() {
		DigestString(h, n)
	}
	if !fs.MultiLabel() {
		DigestInt(h, -1)
		return nil
	}
	var set []int32
	for i := range src.Len() {
		var err error
		if set, err = fs.AppendLabels(set[:0], i); err != nil {
			return err
		}
		DigestInt(h, int64(len(set)))
		for _, c := range set {
			DigestInt(h, int64(c))
		}
	}
	return nil
}

// batchFields is what a batch holds of its samples' extra fields and
// label sets: per field, per sample, a buffer that keeps its array from
// batch to batch, so the steady state allocates nothing. Each sample's
// entries are written by the one worker that fills it.
type batchFields struct {
	val     [][][]byte // [field][sample]
	present [][]bool   // [field][sample]
	labels  [][]int32  // [sample]: its label set, when multi-label
}

func newBatchFields(fields, bs int, multi bool) batchFields {
	var f batchFields
	if fields > 0 {
		f.val, f.present = make([][][]byte, fields), make([][]bool, fields)
		for k := range fields {
			f.val[k], f.present[k] = make([][]byte, bs), make([]bool, bs)
		}
	}
	if multi {
		f.labels = make([][]int32, bs)
	}
	return f
}

// Field returns field f of sample k (nil when absent, see Present). It
// stays valid until Release.
func (b *Batch) Field(f, k int) []byte {
	if !b.fields.present[f][k] {
		return nil // its buffer keeps its array for the next batch
	}
	return b.fields.val[f][k]
}

// Present reports whether sample k has field f.
func (b *Batch) Present(f, k int) bool { return b.fields.present[f][k] }

// NumFields returns the number of extra fields (FieldNamesOf the source).
func (b *Batch) NumFields() int { return len(b.fields.val) }

// MultiLabel reports whether the batch carries label sets (LabelSet).
func (b *Batch) MultiLabel() bool { return b.fields.labels != nil }

// LabelSet returns sample k's classes when the source is multi-label
// (MultiLabelOf), else nil. It stays valid until Release.
func (b *Batch) LabelSet(k int) []int32 {
	if b.fields.labels == nil {
		return nil
	}
	return b.fields.labels[k]
}

// checkFields fails b if its fields are over MaxBatchFieldBytes. It runs
// on the worker that wrote b's last sample, so the outcome depends only
// on the batch's samples, not on the number of workers.
func (l *Loader) checkFields(b *Batch) {
	if l.fields == nil {
		return
	}
	total := 0
	for f := range b.fields.val {
		for k := range b.Len() {
			total += len(b.fields.val[f][k])
		}
	}
	if total > MaxBatchFieldBytes {
		b.fail(fmt.Errorf("loader: epoch %d batch %d: %w: its fields have %d bytes, over the %d a batch may carry (lower maxfieldbytes= or the batch size)",
			b.Epoch, b.Index, ErrFieldTooLarge, total, MaxBatchFieldBytes))
	}
}

// fillFields reads sample idx's fields and label set into slot k of b;
// a sample that failed clears them.
func (l *Loader) fillFields(b *Batch, k int, idx int64, failed bool) error {
	fs := l.fields
	bf := &b.fields
	for f := range bf.val {
		v, ok := bf.val[f][k][:0], false
		if !failed {
			var err error
			if v, ok, err = fs.AppendField(v, idx, f); err != nil {
				return err
			}
		}
		bf.val[f][k], bf.present[f][k] = v, ok
	}
	if bf.labels != nil {
		v := bf.labels[k][:0]
		if !failed {
			var err error
			if v, err = fs.AppendLabels(v, idx); err != nil {
				return err
			}
			for _, c := range v {
				if c < 0 || int(c) >= len(l.src.Classes()) {
					return fmt.Errorf("%w: class %d of a label set is not in [0, %d)", ErrLabel, c, len(l.src.Classes()))
				}
			}
		}
		bf.labels[k] = v
	}
	return nil
}
