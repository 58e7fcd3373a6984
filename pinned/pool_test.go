package pinned

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

func newPool(t testing.TB, cfg Config) *Pool {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	t.Cleanup(func() { p.CloseForce() })
	return p
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want []string // every fragment must appear
	}{
		{"zero", Config{}, []string{"Slots = 0", "SlotSize = 0"}},
		{"negative size", Config{SlotSize: -1, Slots: 2}, []string{"SlotSize = -1"}},
		{"too many slots and bad name", Config{SlotSize: 1, Slots: MaxSlots + 1, Name: "a\x00b"}, []string{"want <= 65536", "NUL"}},
		{"slot over 64 GiB", Config{SlotSize: 65 << 30, Slots: 1}, []string{"SlotSize = 69793218560"}},
		{"total over 64 GiB", Config{SlotSize: 1 << 30, Slots: 65}, []string{"Slots*SlotSize"}},
		{"long name", Config{SlotSize: 1, Slots: 1, Name: strings.Repeat("x", 201)}, []string{"Name is 201 bytes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(tt.cfg)
			if err == nil {
				p.Close()
				t.Fatal("New succeeded")
			}
			var ce *ConfigError
			if !errors.Is(err, ErrBadConfig) || !errors.As(err, &ce) {
				t.Fatalf("err = %v, want a *ConfigError wrapping ErrBadConfig", err)
			}
			if len(ce.Problems) != len(tt.want) {
				t.Errorf("problems = %q, want %d", ce.Problems, len(tt.want))
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err %q lacks %q", err, w)
				}
			}
			if !strings.HasPrefix(err.Error(), "pinned: ") {
				t.Errorf("err %q lacks package prefix", err)
			}
		})
	}
}

func TestLeaseBlocksUntilTimeout(t *testing.T) {
	p := newPool(t, Config{SlotSize: 100, Slots: 3, NoLock: true})
	for i := 0; i < 3; i++ {
		if _, err := p.Lease(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if s, ok := p.TryLease(); ok {
		t.Fatalf("TryLease on a full pool gave slot %d", s.Index())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	start := time.Now()
	s, err := p.Lease(ctx)
	if s != nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lease = %v, %v; want DeadlineExceeded", s, err)
	}
	if d := time.Since(start); d < 25*time.Millisecond {
		t.Errorf("Lease returned after %v, before the deadline", d)
	}
	if st := p.Stats(); st.SlotsInUse != 3 || st.Waits != 1 {
		t.Errorf("stats = %+v, want 3 in use, 1 wait", st)
	}
}

func TestReleaseWakesBlockedLease(t *testing.T) {
	p := newPool(t, Config{SlotSize: 1, Slots: 1, NoLock: true})
	held, _ := p.Lease(context.Background())
	got := make(chan *Slot)
	go func() {
		s, err := p.Lease(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- s
	}()
	select {
	case s := <-got:
		t.Fatalf("Lease returned slot %v while the only slot was leased", s)
	case <-time.After(20 * time.Millisecond):
	}
	if err := held.Release(); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-got:
		if s.Index() != 0 || s.Gen() != 2 {
			t.Errorf("woken lease got slot %d gen %d, want 0 gen 2", s.Index(), s.Gen())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Release did not wake the blocked Lease")
	}
}

// TestNoDoubleHandout hammers the pool; each goroutine claims a per-slot
// owner flag and stamps the slot's bytes, so a slot given to two holders at
// once fails the claim or the stamp check.
func TestNoDoubleHandout(t *testing.T) {
	const slots, workers, iters = 4, 8, 2000
	p := newPool(t, Config{SlotSize: 64, Slots: slots, NoLock: true})
	owner := make([]atomic.Int32, slots)
	var wg sync.WaitGroup
	for w := 1; w <= workers; w++ {
		wg.Add(1)
		go func(id int32) {
			defer wg.Done()
			for n := 0; n < iters; n++ {
				var s *Slot
				if n%3 == 0 {
					var ok bool
					if s, ok = p.TryLease(); !ok {
						continue
					}
				} else {
					var err error
					if s, err = p.Lease(context.Background()); err != nil {
						t.Error(err)
						return
					}
				}
				if !owner[s.Index()].CompareAndSwap(0, id) {
					t.Errorf("slot %d handed to %d while held by %d", s.Index(), id, owner[s.Index()].Load())
					return
				}
				b := s.Bytes()
				b[0], b[63] = byte(id), byte(id)
				if n%16 == 0 {
					time.Sleep(time.Microsecond)
				}
				if b[0] != byte(id) || b[63] != byte(id) {
					t.Errorf("slot %d bytes overwritten while held by %d", s.Index(), id)
				}
				owner[s.Index()].Store(0)
				if err := s.Release(); err != nil {
					t.Error(err)
					return
				}
			}
		}(int32(w))
	}
	wg.Wait()
	st := p.Stats()
	if st.SlotsInUse != 0 || st.Leases != st.Releases {
		t.Errorf("after the storm stats = %+v, want 0 in use and leases == releases", st)
	}
	if err := p.Close(); err != nil {
		t.Errorf("Close after all releases: %v", err)
	}
}

func TestDoubleRelease(t *testing.T) {
	p := newPool(t, Config{SlotSize: 1, Slots: 2, NoLock: true})
	s, _ := p.Lease(context.Background())
	if err := s.Release(); err != nil {
		t.Fatal(err)
	}
	before := p.Stats()
	err := s.Release()
	var se *SlotError
	if !errors.Is(err, ErrNotLeased) || !errors.As(err, &se) || se.Index != s.Index() || se.Gen != 1 {
		t.Fatalf("second Release = %v, want SlotError{Index %d, Gen 1} wrapping ErrNotLeased", err, s.Index())
	}
	if after := p.Stats(); after != before {
		t.Errorf("stats changed by a refused release: %+v -> %+v", before, after)
	}
	// The free list still holds each slot exactly once.
	a, ok1 := p.TryLease()
	b, ok2 := p.TryLease()
	_, ok3 := p.TryLease()
	if !ok1 || !ok2 || ok3 || a.Index() == b.Index() {
		t.Fatalf("free list corrupted: got %v %v %v", ok1, ok2, ok3)
	}
	var nilSlot *Slot
	if err := nilSlot.Release(); !errors.Is(err, ErrNotLeased) {
		t.Errorf("nil Slot Release = %v, want ErrNotLeased", err)
	}
}

func TestStaleHandle(t *testing.T) {
	p := newPool(t, Config{SlotSize: 1, Slots: 1, NoLock: true})
	stale, _ := p.Lease(context.Background())
	staleGen := stale.Gen()
	stale.Release()
	// The package promises detection for 3 re-leases (HandleRing 4).
	for k := 1; k <= 3; k++ {
		cur, err := p.Lease(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if cur == stale {
			t.Fatalf("re-lease %d reused the stale handle", k)
		}
		if err := stale.Release(); !errors.Is(err, ErrNotLeased) {
			t.Fatalf("stale Release after %d re-leases = %v, want ErrNotLeased", k, err)
		}
		if err := p.ReleaseIndex(0, staleGen); !errors.Is(err, ErrNotLeased) {
			t.Fatalf("stale ReleaseIndex = %v, want ErrNotLeased", err)
		}
		if _, ok := p.TryLease(); ok {
			t.Fatal("stale release freed a re-leased slot")
		}
		if got, err := p.Slot(0, cur.Gen()); err != nil || got != cur {
			t.Fatalf("Slot(0, %d) = %v, %v; want the current handle", cur.Gen(), got, err)
		}
		if err := cur.Release(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReleaseIndex(t *testing.T) {
	p := newPool(t, Config{SlotSize: 1, Slots: 2, NoLock: true})
	s, _ := p.Lease(context.Background())
	i, g := s.Index(), s.Gen()
	for _, tc := range []struct {
		i    int
		g    uint64
		want error
	}{{-1, g, ErrBadIndex}, {2, g, ErrBadIndex}, {i, 0, ErrNotLeased}, {i, g + 1, ErrNotLeased}, {1 - i, 1, ErrNotLeased}} {
		if err := p.ReleaseIndex(tc.i, tc.g); !errors.Is(err, tc.want) {
			t.Errorf("ReleaseIndex(%d, %d) = %v, want %v", tc.i, tc.g, err, tc.want)
		}
	}
	if err := p.ReleaseIndex(i, g); err != nil {
		t.Fatalf("ReleaseIndex(%d, %d) = %v", i, g, err)
	}
	if err := s.Release(); !errors.Is(err, ErrNotLeased) {
		t.Errorf("handle Release after ReleaseIndex = %v, want ErrNotLeased", err)
	}
	if _, err := p.Slot(i, g); !errors.Is(err, ErrNotLeased) {
		t.Errorf("Slot of a released lease = %v, want ErrNotLeased", err)
	}
}

func TestAlignment(t *testing.T) {
	p := newPool(t, Config{SlotSize: 5000, Slots: 3, NoLock: true})
	if p.SlotSize() != int(roundPage(5000)) || p.SlotSize()%pageSize != 0 {
		t.Fatalf("SlotSize = %d, want 5000 rounded to %d-byte pages", p.SlotSize(), pageSize)
	}
	base := uintptr(unsafe.Pointer(&p.mem[0]))
	for i := 0; i < 3; i++ {
		s, _ := p.Lease(context.Background())
		b := s.Bytes()
		if len(b) != p.SlotSize() || cap(b) != p.SlotSize() {
			t.Errorf("slot %d len/cap = %d/%d, want %d", s.Index(), len(b), cap(b), p.SlotSize())
		}
		addr := uintptr(unsafe.Pointer(&b[0]))
		if s.Offset()%pageSize != 0 || addr%uintptr(pageSize) != 0 || addr-base != uintptr(s.Offset()) {
			t.Errorf("slot %d offset %d addr %#x base %#x: not page-aligned or offset wrong", s.Index(), s.Offset(), addr, base)
		}
		if s.Offset() != s.Index()*p.SlotSize() || s.Pool() != p {
			t.Errorf("slot %d offset %d pool %p", s.Index(), s.Offset(), s.Pool())
		}
		for j := range b {
			b[j] = byte(s.Index() + 1)
		}
	}
	// Slots don't overlap: each kept its own fill.
	for i := 0; i < 3; i++ {
		seg := p.mem[i*p.SlotSize() : (i+1)*p.SlotSize()]
		for j, v := range seg {
			if v != byte(i+1) {
				t.Fatalf("region byte %d of slot %d = %d, want %d", j, i, v, i+1)
			}
		}
	}
}

func TestStats(t *testing.T) {
	p := newPool(t, Config{SlotSize: 3 * pageSize, Slots: 4, NoLock: true})
	a, _ := p.Lease(context.Background())
	p.Lease(context.Background())
	a.Release()
	want := Stats{Slots: 4, SlotsInUse: 1, SlotSize: int64(3 * pageSize), BytesMapped: int64(12 * pageSize),
		Leases: 2, Releases: 1}
	if got := p.Stats(); got != want {
		t.Errorf("Stats = %+v, want %+v", got, want)
	}
	if p.Size() != 12*pageSize || p.Slots() != 4 || p.Fd() != -1 || p.File() != nil || p.Shared() {
		t.Errorf("Size %d Slots %d Fd %d File %v Shared %v", p.Size(), p.Slots(), p.Fd(), p.File(), p.Shared())
	}
}

func TestClose(t *testing.T) {
	p := newPool(t, Config{SlotSize: 1, Slots: 2, NoLock: true})
	s, _ := p.Lease(context.Background())
	if err := p.Close(); !errors.Is(err, ErrBusy) {
		t.Fatalf("Close with a leased slot = %v, want ErrBusy", err)
	}
	// The busy Close left the pool whole: the other slot is still free.
	o, ok := p.TryLease()
	if !ok {
		t.Fatal("busy Close lost a free slot")
	}
	o.Release()
	s.Release()
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := p.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close = %v, want ErrClosed", err)
	}
	if _, err := p.Lease(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Lease after Close = %v, want ErrClosed", err)
	}
	if _, ok := p.TryLease(); ok {
		t.Error("TryLease after Close succeeded")
	}
	if s.Bytes() != nil || p.Stats().BytesMapped != 0 {
		t.Error("region still reported mapped after Close")
	}
}

func TestCloseWakesBlockedLease(t *testing.T) {
	p := newPool(t, Config{SlotSize: 1, Slots: 1, NoLock: true})
	s, _ := p.Lease(context.Background())
	errc := make(chan error)
	go func() {
		_, err := p.Lease(context.Background())
		errc <- err
	}()
	time.Sleep(10 * time.Millisecond)
	if err := p.CloseForce(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("blocked Lease woke with %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("CloseForce did not wake the blocked Lease")
	}
	// The holder's memory stays mapped until it releases.
	if b := s.Bytes(); b == nil || p.Stats().BytesMapped == 0 {
		t.Fatal("CloseForce unmapped under a holder")
	}
	s.Bytes()[0] = 1
	if err := s.Release(); err != nil {
		t.Fatal(err)
	}
	if s.Bytes() != nil || p.Stats().BytesMapped != 0 {
		t.Error("last release after CloseForce did not unmap")
	}
	if _, ok := p.TryLease(); ok {
		t.Error("TryLease after CloseForce succeeded")
	}
}

func TestLeaseReleaseAllocs(t *testing.T) {
	p := newPool(t, Config{SlotSize: 1, Slots: 2, NoLock: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	allocs := testing.AllocsPerRun(1000, func() {
		s, err := p.Lease(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Release(); err != nil {
			t.Fatal(err)
		}
		if s, ok := p.TryLease(); ok {
			p.ReleaseIndex(s.Index(), s.Gen())
		}
	})
	if allocs != 0 {
		t.Errorf("Lease+Release allocates %v times per run, want 0", allocs)
	}
}

// TestCloseForceRace closes while workers lease and release: no holder may
// ever see its slot unmapped, and the region is unmapped once all are back.
func TestCloseForceRace(t *testing.T) {
	for round := 0; round < 20; round++ {
		p := newPool(t, Config{SlotSize: 8, Slots: 2, NoLock: true})
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					s, err := p.Lease(context.Background())
					if err != nil {
						if !errors.Is(err, ErrClosed) {
							t.Error(err)
						}
						return
					}
					b := s.Bytes()
					if b == nil {
						t.Error("a holder saw its slot unmapped")
					} else {
						b[0]++
					}
					if err := s.Release(); err != nil {
						t.Error(err)
					}
				}
			}()
		}
		time.Sleep(time.Millisecond)
		if err := p.CloseForce(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if st := p.Stats(); st.SlotsInUse != 0 || st.BytesMapped != 0 || st.Leases != st.Releases {
			t.Fatalf("round %d: after CloseForce and all releases stats = %+v", round, st)
		}
	}
}
