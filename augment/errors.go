package augment

import (
	"errors"
	"fmt"
)

// Sentinel errors; test with errors.Is.
var (
	// ErrInvalidSpec: the input or folded output Spec is not a usable image.
	ErrInvalidSpec = errors.New("augment: invalid spec")
	// ErrInvalidOp: an op cannot follow the ones before it (see *OpError).
	ErrInvalidOp = errors.New("augment: invalid op")
	// ErrSyntax: ParseOps could not read its text.
	ErrSyntax = errors.New("augment: syntax error")
	// ErrBufferSize: Apply's src is not In().Bytes() long, or dst is
	// shorter than Out().Bytes().
	ErrBufferSize = errors.New("augment: wrong buffer size")
	// ErrParams: Params outside what the pipeline can draw.
	ErrParams = errors.New("augment: params out of range")
)

// OpError reports the op of a chain that NewPipeline rejected. It matches
// ErrInvalidOp.
type OpError struct {
	Index int   // position in the chain
	Op    Op    // the op; nil when it was nil or not one of this package's
	Err   error // the reason
}

func (e *OpError) Error() string {
	if e.Op == nil {
		return fmt.Sprintf("augment: op %d: %v", e.Index, e.Err)
	}
	return fmt.Sprintf("augment: op %d (%s): %v", e.Index, e.Op, e.Err)
}

// Unwrap returns the reason and ErrInvalidOp.
func (e *OpError) Unwrap() []error { return []error{e.Err, ErrInvalidOp} }

// errText is a plain reason for an OpError.
type errText string

func (e errText) Error() string { return string(e) }

// kindError gives err's message and matches both err and kind.
type kindError struct{ err, kind error }

func (e kindError) Error() string   { return e.err.Error() }
func (e kindError) Unwrap() []error { return []error{e.err, e.kind} }

// errorf formats a message that matches kind.
func errorf(kind error, format string, args ...any) error {
	return kindError{fmt.Errorf(format, args...), kind}
}
