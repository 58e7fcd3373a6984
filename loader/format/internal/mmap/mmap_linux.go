package mmap

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/loaderd/loaderd/loader"
)

// populateLimit is the largest file whose page tables are filled at open.
// Touching a mapped page the first time costs over a microsecond on these
// machines, while MAP_POPULATE fills a cached file's tables in bulk for a
// fraction of that; beyond the limit it would read too much up front.
const populateLimit = 1 << 30

// Map maps path read-only. The mapping outlives the descriptor, so the
// file is closed before returning. It is registered with the loader, so
// that a worker that faults reading it because the file shrank reports
// loader.ErrFault instead of killing the process.
func Map(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := fi.Size()
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file")
	}
	if size == 0 {
		return []byte{}, nil
	}
	if int64(int(size)) != size {
		return nil, fmt.Errorf("file too large to map (%d bytes)", size)
	}
	flags := unix.MAP_SHARED
	if size <= populateLimit {
		flags |= unix.MAP_POPULATE
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, flags)
	if err != nil {
		return nil, fmt.Errorf("mmap: %w", err)
	}
	// Records are read in shuffled order; readahead would only waste I/O.
	_ = unix.Madvise(data, unix.MADV_RANDOM)
	loader.RegisterMapping(data, path)
	return data, nil
}

// Unmap releases a mapping made by Map.
func Unmap(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	loader.UnregisterMapping(b)
	return unix.Munmap(b)
}
