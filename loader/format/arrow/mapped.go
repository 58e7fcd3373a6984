package arrow

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/format/internal/mmap"
)

// mapped is what both Arrow sources (raw pixels and encoded images) keep:
// the mapped files, one label per row, the class names.
type mapped struct {
	path    string
	files   []arrowFile
	labels  []int32 // -1 where null or out of int32 range
	classes []string
}

type arrowFile struct {
	path string
	data []byte // mapped
}

// mapAll maps the files in turn, indexing each (index(k) reads file k),
// then requires at least one row and, when the metadata named no classes,
// names them "0" to the largest label. On error it unmaps what it mapped.
func (m *mapped) mapAll(names []string, index func(k int) error) error {
	for _, name := range names {
		data, err := mmap.Map(name)
		if err != nil {
			m.Close()
			return &loader.RecordError{File: name, Record: -1, Err: err}
		}
		m.files = append(m.files, arrowFile{path: name, data: data})
		if err := index(len(m.files) - 1); err != nil {
			m.Close()
			return &loader.RecordError{File: name, Record: -1, Err: err}
		}
	}
	if len(m.labels) == 0 {
		m.Close()
		return &loader.RecordError{File: m.path, Record: -1, Err: fmt.Errorf("%w: no rows", loader.ErrTruncated)}
	}
	if m.classes == nil {
		hi := int32(-1)
		for _, l := range m.labels {
			hi = max(hi, l)
		}
		for i := range hi + 1 {
			m.classes = append(m.classes, strconv.Itoa(int(i)))
		}
	}
	return nil
}

// Len returns the number of rows.
func (m *mapped) Len() int64 { return int64(len(m.labels)) }

// Classes returns the class names from the metadata, else "0" to the
// largest label.
func (m *mapped) Classes() []string { return m.classes }

// String names the source as arrow:PATH.
func (m *mapped) String() string { return "arrow:" + m.path }

// Label returns the label of row i.
func (m *mapped) Label(i int64) (int32, error) {
	if i < 0 || i >= m.Len() {
		return 0, &loader.RecordError{File: m.path, Record: i, Err: loader.ErrIndex}
	}
	return m.labels[i], nil
}

// Close unmaps the files.
func (m *mapped) Close() error {
	var errs []error
	for i := range m.files {
		errs = append(errs, mmap.Unmap(m.files[i].data))
		m.files[i].data = nil
	}
	return errors.Join(errs...)
}

// openColumns opens a mapped Arrow IPC file, checked, and finds its one
// column of each name: their field indices.
func openColumns(data []byte, col, labelCol string) (r *ipc.FileReader, ci, li int, err error) {
	if err := verifyArrowFooter(data); err != nil {
		return nil, 0, 0, err
	}
	r, err = ipc.NewMappedFileReader(data)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("%w: %w", loader.ErrCorrupt, err)
	}
	schema := r.Schema()
	c, l := schema.FieldIndices(col), schema.FieldIndices(labelCol)
	if len(c) != 1 || len(l) != 1 {
		r.Close()
		return nil, 0, 0, fmt.Errorf("%w: want one %q and one %q column, schema is %s", loader.ErrColumn, col, labelCol, schema)
	}
	return r, c[0], l[0], nil
}
