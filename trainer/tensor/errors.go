package tensor

import (
	"errors"
	"fmt"
)

// Sentinel errors; kernel argument errors wrap ErrArg.
var (
	// ErrArg reports a kernel or copy called with inconsistent arguments.
	ErrArg = errors.New("tensor: bad argument")
	// ErrDevice reports a Buffer used on a device that does not own it.
	ErrDevice = errors.New("tensor: buffer belongs to another device")
	// ErrClosed reports use of a closed device.
	ErrClosed = errors.New("tensor: device closed")
	// ErrOutOfMemory reports an Alloc the device has no room for (CUDA's
	// CUDA_ERROR_OUT_OF_MEMORY, or a limit set on a CPU device); the
	// device stays usable, so a caller can free memory and try less.
	ErrOutOfMemory = errors.New("tensor: out of device memory")
)

// ArgError names the kernel and what was wrong with its arguments.
type ArgError struct {
	Op     string
	Reason string
}

func (e *ArgError) Error() string { return "tensor: " + e.Op + ": " + e.Reason }

// Unwrap lets errors.Is(err, ErrArg) match.
func (e *ArgError) Unwrap() error { return ErrArg }

func argErr(op, format string, a ...any) error {
	return &ArgError{Op: op, Reason: fmt.Sprintf(format, a...)}
}
