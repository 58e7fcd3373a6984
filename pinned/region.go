package pinned

import (
	"fmt"
	"sync"
)

// MapOptions says how Map maps a region.
type MapOptions struct {
	Writable bool // map read-write; the default is read-only
	Lock     bool // try mlock, with the same once-per-process warning and pageable fallback as New
}

// Region is another process's view of a Shared pool's memory, mapped from
// the pool's memfd (received over a Unix socket or opened via /proc/PID/fd/N).
type Region struct {
	mu     sync.Mutex
	b      []byte
	locked bool
	closed bool
}

// Map maps the first size bytes of fd (shared, pre-faulted). The fd can be
// closed after Map returns; the mapping keeps the memory alive. It fails
// unless the file holds at least size bytes.
func Map(fd, size int, opts MapOptions) (*Region, error) {
	if fd < 0 || size <= 0 || int64(size) > MaxRegion {
		return nil, fmt.Errorf("pinned: map fd %d, %d bytes: want fd >= 0 and 0 < size <= %d: %w",
			fd, size, MaxRegion, ErrBadConfig)
	}
	b, err := mapFd(fd, size, opts.Writable)
	if err != nil {
		return nil, err
	}
	r := &Region{b: b}
	if opts.Lock {
		r.locked = lockMem(b, "map")
	}
	return r, nil
}

// Bytes is the mapped memory; nil after Close.
func (r *Region) Bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.b
}

// Len is the mapped size in bytes; 0 after Close.
func (r *Region) Len() int { return len(r.Bytes()) }

// Locked reports whether the mapping is mlocked.
func (r *Region) Locked() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.locked && !r.closed
}

// Close unmaps the region; a second Close returns ErrClosed.
func (r *Region) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	r.closed = true
	b := r.b
	r.b = nil
	return unmapMem(b)
}
