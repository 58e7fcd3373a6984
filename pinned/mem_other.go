//go:build !linux

package pinned

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"unsafe"
)

// SharedSupported reports whether Config.Shared and Map work on this
// platform. Outside Linux there is no memfd to seal and hand over: New with
// Shared and Map return errors matching errors.ErrUnsupported.
const SharedSupported = false

// Outside Linux the pool is plain Go memory: never locked, never shared.
var (
	mlockFn   = func([]byte) error { return errors.ErrUnsupported }
	munlockFn = func([]byte) error { return nil }
)

func mapMem(size int, shared, lazy bool, name string) ([]byte, *os.File, error) {
	if shared {
		return nil, nil, fmt.Errorf("pinned: shared memory on %s: %w", runtime.GOOS, errors.ErrUnsupported)
	}
	// Over-allocate by a page and slice at a page boundary, so slots stay
	// page-aligned like their mmap'ed counterparts.
	raw := make([]byte, size+pageSize)
	off := (pageSize - int(uintptr(unsafe.Pointer(&raw[0]))%uintptr(pageSize))) % pageSize
	b := raw[off : off+size : off+size]
	if !lazy {
		prefaultMem(b, true)
	}
	return b, nil, nil
}

// prefaultMem faults every page of b in now, not on the hot path; fresh
// says nothing was written into b yet (it is zeros, and may be written).
func prefaultMem(b []byte, fresh bool) {
	var sum byte
	for i := 0; i < len(b); i += pageSize {
		if fresh {
			b[i] = 0
		} else {
			sum += b[i]
		}
	}
	faultSink = sum
}

var faultSink byte // keeps prefaultMem's reads

func unmapMem([]byte) error { return nil }

func mapFd(fd, size int, writable bool) ([]byte, error) {
	return nil, fmt.Errorf("pinned: map fd on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

func openReadOnly(*os.File) (*os.File, error) {
	return nil, fmt.Errorf("pinned: shared memory on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
