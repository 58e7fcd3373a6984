package pinned

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestSharedMemfd(t *testing.T) {
	p := newPool(t, Config{SlotSize: 2 * pageSize, Slots: 3, Shared: true, NoLock: true, Name: "pinned-test"})
	if !p.Shared() || p.Fd() < 0 || p.File() == nil || !p.Stats().Shared {
		t.Fatalf("shared pool: Shared %v Fd %d File %v", p.Shared(), p.Fd(), p.File())
	}
	link, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", p.Fd()))
	if err != nil || !strings.Contains(link, "memfd:pinned-test") {
		t.Errorf("fd link = %q, %v; want the memfd name", link, err)
	}
	first, _ := p.Lease(context.Background())
	s, _ := p.Lease(context.Background())
	msg := []byte("batch 7 lives here")
	copy(s.Bytes(), msg)
	last := s.Bytes()[len(s.Bytes())-1:]
	last[0] = 0xAB

	// A client maps the read-only descriptor SCM_RIGHTS delivers.
	rof, err := p.OpenReadOnly()
	if err != nil {
		t.Fatal(err)
	}
	if w, err := Map(int(rof.Fd()), p.Size(), MapOptions{Writable: true}); err == nil {
		w.Close()
		t.Fatal("a writable mapping of the read-only descriptor succeeded")
	}
	r, err := Map(int(rof.Fd()), p.Size(), MapOptions{Lock: true})
	rof.Close() // the mapping outlives the descriptor
	if err != nil {
		t.Fatalf("Map: %v", err)
	}
	defer r.Close()
	view := r.Bytes()[s.Offset() : s.Offset()+p.SlotSize()]
	if !bytes.HasPrefix(view, msg) || view[len(view)-1] != 0xAB || r.Len() != p.Size() {
		t.Fatalf("client view at offset %d = %q…, want %q", s.Offset(), view[:len(msg)], msg)
	}
	// The daemon's writes reach the client: no copies anywhere.
	s.Bytes()[1] = 'X'
	if view[1] != 'X' {
		t.Error("a write did not cross the shared mapping")
	}

	// /proc/self/fd/N opened as a file reaches the same memory.
	f, err := os.Open("/proc/self/fd/" + strconv.Itoa(p.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := f.ReadAt(got, int64(s.Offset())); err != nil || !bytes.Equal(got[3:], msg[3:]) || got[1] != 'X' {
		t.Errorf("ReadAt via /proc = %q, %v", got, err)
	}
	ro, err := Map(int(f.Fd()), p.Size(), MapOptions{})
	f.Close()
	if err != nil {
		t.Fatalf("read-only Map via /proc: %v", err)
	}
	if ro.Bytes()[s.Offset()+1] != 'X' || ro.Locked() {
		t.Error("read-only map does not see the pool's bytes, or claims a lock it was not asked for")
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ro.Close(); !errors.Is(err, ErrClosed) || ro.Bytes() != nil {
		t.Errorf("second Region.Close = %v, Bytes %v", err, ro.Bytes())
	}

	// The pool closing does not pull memory from under a client.
	if err := p.CloseForce(); err != nil {
		t.Fatal(err)
	}
	s.Release()
	if p.Stats().BytesMapped == 0 {
		t.Error("unmapped while slot 0 was still leased")
	}
	first.Release()
	if p.Fd() != -1 || p.Stats().BytesMapped != 0 {
		t.Errorf("after close Fd = %d mapped = %d", p.Fd(), p.Stats().BytesMapped)
	}
	if !bytes.HasPrefix(r.Bytes()[s.Offset()+3:], msg[3:]) {
		t.Error("client lost the bytes when the pool closed")
	}
}

// TestSharedSealed: no descriptor of the memfd, not even the daemon's own
// read-write one, can resize it, write to it or map it writable and shared:
// only the pool's own mapping writes. A private writable mapping is allowed,
// and its writes stay private.
func TestSharedSealed(t *testing.T) {
	p := newPool(t, Config{SlotSize: 1, Slots: 2, Shared: true, NoLock: true})
	for _, size := range []int64{0, int64(p.Size()) * 2} {
		if err := unix.Ftruncate(p.Fd(), size); !errors.Is(err, unix.EPERM) {
			t.Errorf("ftruncate(%d) on the memfd = %v, want EPERM (sealed)", size, err)
		}
	}
	if _, err := unix.Pwrite(p.Fd(), []byte("x"), 0); !errors.Is(err, unix.EPERM) {
		t.Errorf("pwrite on the memfd = %v, want EPERM (sealed)", err)
	}
	rw, err := os.OpenFile("/proc/self/fd/"+strconv.Itoa(p.Fd()), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	if b, err := unix.Mmap(int(rw.Fd()), 0, p.Size(), protRW, unix.MAP_SHARED); !errors.Is(err, unix.EPERM) {
		if err == nil {
			unix.Munmap(b)
		}
		t.Errorf("a shared writable mapping through /proc = %v, want EPERM", err)
	}
	priv, err := unix.Mmap(int(rw.Fd()), 0, p.Size(), protRW, unix.MAP_PRIVATE)
	if err != nil {
		t.Fatalf("private mapping: %v", err)
	}
	defer unix.Munmap(priv)
	priv[0] = 'P'
	if p.mem[0] == 'P' {
		t.Error("a private mapping's write reached the pool")
	}
	p.mem[0] = 'D' // the pool's own mapping still writes
	if priv[0] != 'P' {
		t.Error("the pool's write reached a private page already copied")
	}
}

func TestMapErrors(t *testing.T) {
	p := newPool(t, Config{SlotSize: 1, Slots: 1, Shared: true, NoLock: true})
	for _, tc := range []struct {
		fd, size int
	}{{-1, 10}, {p.Fd(), 0}, {p.Fd(), -5}, {p.Fd(), p.Size() + 1}} {
		if r, err := Map(tc.fd, tc.size, MapOptions{}); !errors.Is(err, ErrBadConfig) {
			if r != nil {
				r.Close()
			}
			t.Errorf("Map(%d, %d) = %v, want ErrBadConfig", tc.fd, tc.size, err)
		}
	}
}

// TestRealLock checks mlock for real: one page fits under any RLIMIT_MEMLOCK
// this project runs with (8 MiB unprivileged, unlimited as root).
func TestRealLock(t *testing.T) {
	before := vmLck(t)
	p := newPool(t, Config{SlotSize: 16 * pageSize, Slots: 2, Shared: true})
	if !p.Locked() {
		t.Fatal("a 32-page pool did not lock")
	}
	if d := vmLck(t) - before; d < int64(p.Size()) {
		t.Errorf("VmLck grew by %d bytes, want >= %d", d, p.Size())
	}
}

func vmLck(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmLck:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmLck in /proc/self/status")
	return 0
}
