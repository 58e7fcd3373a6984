package imagedec

import (
	"runtime"
	"strings"
	"testing"
)

// TestDlopenFirst: the first name that loads wins, and a failure lists
// every attempt in order.
func TestDlopenFirst(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("skipped: library names are Linux's")
	}
	missing := []string{"/nonexistent/libloaderd-a.so", "libloaderd-no-such-library.so.9"}
	h, name, err := dlopenFirst(append(missing, "libc.so.6", "libm.so.6"))
	if err != nil || h == 0 || name != "libc.so.6" {
		t.Fatalf("dlopenFirst: %#x %q %v, want libc.so.6", h, name, err)
	}
	if _, ok := dlsym(h, "mallopt"); !ok {
		t.Error("libc.so.6 lacks mallopt")
	}
	if p, ok := dlsym(h, "loaderd_no_such_symbol"); ok || p != 0 {
		t.Errorf("dlsym of a missing symbol: %#x %v", p, ok)
	}
	_, _, err = dlopenFirst(missing)
	if err == nil {
		t.Fatal("no library loaded, no error")
	}
	msg := err.Error()
	if i, j := strings.Index(msg, "libloaderd-a.so"), strings.Index(msg, "libloaderd-no-such-library.so.9"); i < 0 || j < i || strings.Count(msg, "; ") != 1 {
		t.Errorf("error %q does not list both attempts in order", msg)
	}
	if _, _, err := dlopenFirst(nil); err == nil {
		t.Error("no names, no error")
	}
}
