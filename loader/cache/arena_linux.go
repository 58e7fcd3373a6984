package cache

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// newArena maps n bytes of anonymous memory, faulted in as it is written.
// MAP_NORESERVE: the daemon's memory budget, not the kernel's overcommit
// accounting, is what bounds it. Huge pages make the first touch one fault
// per 2 MiB instead of per 4 KiB, where fresh pages are slow to touch.
func newArena(n int64) ([]byte, error) {
	if n == 0 {
		return nil, nil
	}
	if int64(int(n)) != n {
		return nil, fmt.Errorf("%d bytes do not fit the address space", n)
	}
	b, err := unix.Mmap(-1, 0, int(n), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, fmt.Errorf("mmap: %w", err)
	}
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE) // advice: refused where THP is off
	return b, nil
}

// dropArena gives the arena's memory back and makes it inaccessible. It
// stays mapped (address space only, no memory): a view still read after
// Close faults instead of reading whatever a later mapping put there.
func dropArena(b []byte) {
	if len(b) == 0 {
		return
	}
	_ = unix.Mprotect(b, unix.PROT_NONE)
	_ = unix.Madvise(b, unix.MADV_DONTNEED)
}
