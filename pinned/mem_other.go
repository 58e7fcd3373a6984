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

func mapMem(size int, shared bool, name string) ([]byte, *os.File, error) {
	if shared {
		return nil, nil, fmt.Errorf("pinned: shared memory on %s: %w", runtime.GOOS, errors.ErrUnsupported)
	}
	// Over-allocate by a page and slice at a page boundary, so slots stay
	// page-aligned like their mmap'ed counterparts.
	raw := make([]byte, size+pageSize)
	off := (pageSize - int(uintptr(unsafe.Pointer(&raw[0]))%uintptr(pageSize))) % pageSize
	b := raw[off : off+size : off+size]
	for i := 0; i < len(b); i += pageSize {
		b[i] = 0 // fault every page in now, not on the hot path
	}
	return b, nil, nil
}

func unmapMem([]byte) error { return nil }

func mapFd(fd, size int, writable bool) ([]byte, error) {
	return nil, fmt.Errorf("pinned: map fd on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

func openReadOnly(*os.File) (*os.File, error) {
	return nil, fmt.Errorf("pinned: shared memory on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
