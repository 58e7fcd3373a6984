package pinned

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"syscall"
	"testing"
)

// withLock swaps the mlock hook, the warn-once flag and the default logger
// for one test; it is not parallel-safe, so callers don't use t.Parallel.
func withLock(t *testing.T, fail error) *bytes.Buffer {
	t.Helper()
	oldLock, oldUnlock, oldLog := mlockFn, munlockFn, slog.Default()
	oldWarned := lockWarned.Load()
	var buf bytes.Buffer
	mlockFn = func([]byte) error { return fail }
	munlockFn = func([]byte) error { return nil }
	lockWarned.Store(false)
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	t.Cleanup(func() {
		mlockFn, munlockFn = oldLock, oldUnlock
		lockWarned.Store(oldWarned)
		slog.SetDefault(oldLog)
	})
	return &buf
}

func TestLockFallback(t *testing.T) {
	for _, errno := range []error{syscall.EPERM, syscall.ENOMEM, syscall.EAGAIN} {
		t.Run(errno.Error(), func(t *testing.T) {
			buf := withLock(t, errno)
			for i := 0; i < 3; i++ {
				p := newPool(t, Config{SlotSize: 10, Slots: 2})
				if p.Locked() {
					t.Fatal("Locked() = true after a failed mlock")
				}
				if st := p.Stats(); st.Locked || st.BytesLocked != 0 || st.BytesMapped == 0 {
					t.Fatalf("stats after fallback = %+v", st)
				}
				s, _ := p.Lease(context.Background()) // pageable memory still works
				s.Bytes()[0] = 1
				s.Release()
			}
			out := buf.String()
			if n := strings.Count(out, "mlock failed"); n != 1 {
				t.Fatalf("logged %d warnings, want 1:\n%s", n, out)
			}
			if !strings.Contains(out, "level=WARN") || !strings.Contains(out, errno.Error()) {
				t.Errorf("warning lacks level or cause: %s", out)
			}
		})
	}
}

func TestLockSuccessAndNoLock(t *testing.T) {
	buf := withLock(t, nil)
	p := newPool(t, Config{SlotSize: 10, Slots: 2})
	if st := p.Stats(); !p.Locked() || !st.Locked || st.BytesLocked != int64(p.Size()) {
		t.Errorf("locked pool: Locked %v stats %+v", p.Locked(), st)
	}
	mlockFn = func([]byte) error { t.Fatal("mlock called with NoLock"); return nil }
	q := newPool(t, Config{SlotSize: 10, Slots: 2, NoLock: true})
	if q.Locked() || q.Stats().BytesLocked != 0 {
		t.Error("NoLock pool reports locked")
	}
	if buf.Len() != 0 {
		t.Errorf("unexpected log: %s", buf)
	}
}
