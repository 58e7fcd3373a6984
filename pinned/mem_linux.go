//go:build linux

package pinned

import (
	"fmt"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// SharedSupported reports whether Config.Shared and Map work on this
// platform: on Linux, through a sealed memfd.
const SharedSupported = true

// Injectable so tests can exercise the pageable fallback as root.
var (
	mlockFn   = unix.Mlock
	munlockFn = unix.Munlock
)

const protRW = unix.PROT_READ | unix.PROT_WRITE

// mapMem maps size bytes, pre-faulted (see prefault) so no first-touch page
// fault lands on the hot path. With shared, the memory is a sealed memfd
// whose descriptor is returned in f.
func mapMem(size int, shared bool, name string) (b []byte, f *os.File, err error) {
	if !shared {
		b, err = unix.Mmap(-1, 0, size, protRW, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
		if err != nil {
			return nil, nil, fmt.Errorf("pinned: mmap %d bytes: %w", size, err)
		}
		prefault(b, true, true)
		return b, nil, nil
	}
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, nil, fmt.Errorf("pinned: memfd_create %q: %w", name, err)
	}
	f = os.NewFile(uintptr(fd), "memfd:"+name)
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("pinned: ftruncate memfd to %d bytes: %w", size, err)
	}
	b, err = unix.Mmap(fd, 0, size, protRW, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("pinned: mmap memfd %d bytes: %w", size, err)
	}
	// Sealed after our own writable mapping exists, which the seals leave
	// alone: no one holding the fd can write (write(2), a new shared
	// writable mapping: F_SEAL_FUTURE_WRITE), nor shrink the file under our
	// mapping (our next write to the cut-off pages would SIGBUS the
	// daemon), grow it, or change the seals.
	seals := unix.F_SEAL_FUTURE_WRITE | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		unix.Munmap(b)
		f.Close()
		return nil, nil, fmt.Errorf("pinned: seal memfd: %w", err)
	}
	prefault(b, true, true)
	return b, f, nil
}

// faultSink keeps prefault's reads from being optimised away.
var faultSink atomic.Uint32

// prefault makes every page of b present (and writable if write) before
// the hot path sees it; fresh says b is new zeroed memory we may write.
// MAP_POPULATE alone is not enough on these machines (VMs): it maps the
// pages, yet the first write to each still costs ~5 µs below the guest
// kernel (no page fault is counted). MADV_POPULATE_WRITE (Linux 5.14) plus
// one read a page leaves nothing behind: for 64 MiB, New spends ~55 ms and
// the first write pass ~0.5 ms, against ~25 ms + ~90 ms with MAP_POPULATE.
func prefault(b []byte, write, fresh bool) {
	adv := unix.MADV_POPULATE_READ
	if write {
		adv = unix.MADV_POPULATE_WRITE
	}
	populated := unix.Madvise(b, adv) == nil
	var sum uint32
	for i := 0; i < len(b); i += pageSize {
		if write && fresh && !populated {
			b[i] = 0 // older kernel: take the write fault now; fresh memory is zeros
			continue
		}
		sum += uint32(b[i])
	}
	faultSink.Store(sum)
}

func unmapMem(b []byte) error {
	if err := unix.Munmap(b); err != nil {
		return fmt.Errorf("pinned: munmap: %w", err)
	}
	return nil
}

// mapFd maps size bytes of fd, checking first that the file is that large:
// touching a mapped page past EOF raises SIGBUS, which Go cannot recover.
func mapFd(fd, size int, writable bool) ([]byte, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("pinned: map: fstat fd %d: %w", fd, err)
	}
	if st.Size < int64(size) {
		return nil, fmt.Errorf("pinned: map: fd %d holds %d bytes, want %d: %w", fd, st.Size, size, ErrBadConfig)
	}
	prot := unix.PROT_READ
	if writable {
		prot = protRW
	}
	b, err := unix.Mmap(fd, 0, size, prot, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("pinned: map: mmap fd %d, %d bytes: %w", fd, size, err)
	}
	prefault(b, writable, false)
	return b, nil
}

// openReadOnly opens f again, read-only: a new open file description, so
// the receiver cannot even ask for write access through fcntl.
func openReadOnly(f *os.File) (*os.File, error) {
	ro, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", f.Fd()), os.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("pinned: reopen memfd read-only: %w", err)
	}
	return ro, nil
}
