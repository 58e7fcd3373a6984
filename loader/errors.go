package loader

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors, shared by every format. A *RecordError wraps one of
// them (or an I/O error, or a format's own sentinel), so callers test with
// errors.Is and find the file and record with errors.As.
var (
	ErrUnknownFormat = errors.New("unknown format")
	ErrTruncated     = errors.New("truncated file")
	ErrLabel         = errors.New("label out of range")
	ErrIndex         = errors.New("index out of range")
	ErrCorrupt       = errors.New("corrupt record")
	ErrClosed        = errors.New("loader closed")
	// ErrEmptyClass: a folder layout (a directory, a tar shard) with a
	// class that holds no image, or no class at all.
	ErrEmptyClass = errors.New("empty class folder")
	// ErrColumn: a table (Arrow, Parquet) lacks a column, or has it with
	// the wrong type.
	ErrColumn = errors.New("missing or mistyped column")
	// ErrFault: reading a memory-mapped file faulted, because the file
	// shrank under the mapping (truncated, or rewritten in place) or its
	// storage failed. The daemon keeps serving; the sample is unreadable.
	// (A file replaced by rename is not an error: the mapping keeps the
	// old file.)
	ErrFault = errors.New("file changed or failed while mapped")
	// ErrNotRegular: a sample's file is a FIFO, a device, a socket or a
	// directory, which a worker must never open for reading (a FIFO would
	// block it for good).
	ErrNotRegular = errors.New("not a regular file")
)

// RecordError says which file and record a problem was found in.
// Record is -1 when the problem concerns the whole file.
type RecordError struct {
	File   string
	Record int64
	Err    error
}

func (e *RecordError) Error() string {
	if e.Record < 0 {
		return fmt.Sprintf("loader: %s: %v", e.File, e.Err)
	}
	return fmt.Sprintf("loader: %s: record %d: %v", e.File, e.Record, e.Err)
}

func (e *RecordError) Unwrap() error { return e.Err }

// SampleError says which sample of which batch failed.
type SampleError struct {
	Epoch, Batch int64 // position of the batch in the stream
	Index        int64 // dataset index of the sample
	Err          error
}

func (e *SampleError) Error() string {
	// The wrapped error usually carries the package prefix already.
	msg := strings.TrimPrefix(e.Err.Error(), "loader: ")
	return fmt.Sprintf("loader: epoch %d batch %d: sample %d: %s", e.Epoch, e.Batch, e.Index, msg)
}

func (e *SampleError) Unwrap() error { return e.Err }
