//go:build linux

package loader

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// fakeFault is what the runtime panics with on a fault under
// debug.SetPanicOnFault: a runtime.Error with the faulting address.
type fakeFault uintptr

func (f fakeFault) Error() string    { return "fault" }
func (f fakeFault) RuntimeError()    {}
func (f fakeFault) Addr() uintptr    { return uintptr(f) }
func addrOf(b []byte, i int) uintptr { return uintptr(unsafe.Pointer(&b[i])) }

// TestMappedFault: a fault is a file fault only inside a registered
// mapping; any other (a bug in unsafe code) is not recovered.
func TestMappedFault(t *testing.T) {
	data := make([]byte, 100)
	RegisterMapping(data, "x.bin")
	if m, off, ok := mappedFault(fakeFault(addrOf(data, 10))); !ok || off != 10 || m.file != "x.bin" {
		t.Fatalf("fault inside: %v %d %v, want x.bin 10 true", m, off, ok)
	}
	for _, r := range []any{fakeFault(addrOf(data, 0) + 100), fakeFault(addrOf(data, 0) - 1), errors.New("fault"), "fault"} {
		if _, _, ok := mappedFault(r); ok {
			t.Fatalf("%#v taken for a fault inside the mapping", r)
		}
	}
	UnregisterMapping(data)
	if _, _, ok := mappedFault(fakeFault(addrOf(data, 10))); ok {
		t.Fatal("fault inside an unregistered mapping taken for a file fault")
	}
}

// TestGuardOpen: a fault while a format indexes a mapped file that
// shrank is an ErrFault naming the file; any other panic goes on.
func TestGuardOpen(t *testing.T) {
	skipWithoutFaultAddress(t)
	page := os.Getpagesize()
	path := filepath.Join(t.TempDir(), "x.bin")
	if err := os.WriteFile(path, make([]byte, 3*page), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	data, err := unix.Mmap(int(f.Fd()), 0, 3*page, unix.PROT_READ, unix.MAP_SHARED)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	RegisterMapping(data, path)
	defer func() {
		UnregisterMapping(data)
		unix.Munmap(data)
	}()
	if err := os.Truncate(path, int64(page)); err != nil {
		t.Fatal(err)
	}
	var sink byte
	src, err := guardOpen(func() (Source, error) {
		sink = data[2*page+5]
		return nil, nil
	})
	var re *RecordError
	if src != nil || !errors.Is(err, ErrFault) || !errors.As(err, &re) || re.File != path {
		t.Fatalf("guardOpen = %v, %v (read %d); want ErrFault naming %s", src, err, sink, path)
	}
	t.Log(err)
	defer func() {
		if r := recover(); r != "boom" {
			t.Fatalf("recovered %v, want the opener's own panic", r)
		}
	}()
	guardOpen(func() (Source, error) { panic("boom") })
}
