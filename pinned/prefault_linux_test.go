package pinned

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// TestPrefault counts this thread's minor page faults while writing one
// byte a page of a fresh pool: pre-faulting must leave none for the hot
// path (without it there is one per page).
func TestPrefault(t *testing.T) {
	const pages = 1024
	for _, cfg := range []Config{
		{SlotSize: pages / 4 * pageSize, Slots: 4, NoLock: true},
		{SlotSize: pages / 4 * pageSize, Slots: 4, NoLock: true, Shared: true},
		{SlotSize: pages / 4 * pageSize, Slots: 4, Shared: true},
	} {
		p := newPool(t, cfg)
		if got := writeFaults(t, p.mem); got > pages/10 {
			t.Errorf("%+v: %d minor faults writing %d fresh pages, want ~0", cfg, got, pages)
		}
	}
	// Control: the same loop over memory mapped without pre-faulting.
	b, err := unix.Mmap(-1, 0, pages*pageSize, protRW, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(b)
	if got := writeFaults(t, b); got < pages/2 {
		t.Errorf("control: %d faults for %d untouched pages; the counter does not work", got, pages)
	}
}

func writeFaults(t *testing.T, b []byte) int64 {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var before, after unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &before); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(b); i += pageSize {
		b[i] = 1
	}
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &after); err != nil {
		t.Fatal(err)
	}
	return after.Minflt - before.Minflt
}
