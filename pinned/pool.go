package pinned

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
)

// closedBit shares a word with the in-use count, so "last slot back after
// close" is decided by one atomic operation, never by two separate reads.
const closedBit = 1 << 62

// HandleRing is how many *Slot handles each slot rotates through. A stale
// handle is caught unless its slot has been re-leased a multiple of
// HandleRing times since; ReleaseIndex compares the full generation.
const HandleRing = 4

// Pool is one region cut into fixed slots.
type Pool struct {
	name     string
	slotSize int
	n        int
	shared   bool
	locked   bool
	mem      []byte
	file     *os.File // memfd; nil unless shared

	// state[i] = gen<<1 | leased. gen counts leases of slot i from 1, so a
	// (index, gen) pair names one lease and can't match a later one.
	state   []atomic.Uint64
	handles []Slot     // HandleRing per slot, preallocated
	free    chan int32 // free slot indices; capacity n, so sends never block
	done    chan struct{}

	closed   atomic.Bool
	unmapped atomic.Bool
	use      atomic.Int64 // leased slots, | closedBit once closed
	leases   atomic.Uint64
	releases atomic.Uint64
	waits    atomic.Uint64

	closeMu   sync.Mutex
	unmapOnce sync.Once
	unmapErr  error
}

// New validates cfg, maps and pre-faults the region and, unless cfg.NoLock,
// mlocks it (falling back to pageable memory with one warning per process).
func New(cfg Config) (*Pool, error) {
	slot, total, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	name := cfg.Name
	if name == "" {
		name = "loaderd"
	}
	mem, f, err := mapMem(int(total), cfg.Shared, name)
	if err != nil {
		return nil, err
	}
	p := &Pool{
		name:     name,
		slotSize: int(slot),
		n:        cfg.Slots,
		shared:   cfg.Shared,
		mem:      mem,
		file:     f,
		state:    make([]atomic.Uint64, cfg.Slots),
		handles:  make([]Slot, cfg.Slots*HandleRing),
		free:     make(chan int32, cfg.Slots),
		done:     make(chan struct{}),
	}
	if !cfg.NoLock {
		p.locked = lockMem(mem, name)
	}
	for i := 0; i < p.n; i++ {
		off := i * p.slotSize
		b := mem[off : off+p.slotSize : off+p.slotSize]
		for k := 0; k < HandleRing; k++ {
			h := &p.handles[i*HandleRing+k]
			h.p, h.idx, h.off, h.b = p, int32(i), off, b
		}
		p.free <- int32(i)
	}
	return p, nil
}

// Lease returns a free slot, blocking until one is released, ctx is done
// (the error wraps ctx.Err()) or the pool is closed (ErrClosed). A nil ctx
// means context.Background(). It allocates nothing.
func (p *Pool) Lease(ctx context.Context) (*Slot, error) {
	if p.closed.Load() {
		return nil, ErrClosed
	}
	select {
	case i := <-p.free:
		return p.take(i)
	default:
	}
	if ctx == nil {
		ctx = context.Background()
	}
	p.waits.Add(1)
	select {
	case i := <-p.free:
		return p.take(i)
	case <-ctx.Done():
		return nil, fmt.Errorf("pinned: lease: %w", ctx.Err())
	case <-p.done:
		return nil, ErrClosed
	}
}

// TryLease returns a free slot, or false at once if there is none or the
// pool is closed.
func (p *Pool) TryLease() (*Slot, bool) {
	if p.closed.Load() {
		return nil, false
	}
	select {
	case i := <-p.free:
		s, err := p.take(i)
		return s, err == nil
	default:
		return nil, false
	}
}

// take marks free slot i leased. Counting the lease and reading closedBit
// is one atomic add, so a force close either sees this lease or this lease
// sees the close: the region is never unmapped under a holder.
func (p *Pool) take(i int32) (*Slot, error) {
	if p.use.Add(1)&closedBit != 0 {
		p.free <- i
		p.dropUse()
		return nil, ErrClosed
	}
	st := &p.state[i]
	g := st.Load()>>1 + 1
	h := &p.handles[int(i)*HandleRing+int(g%HandleRing)]
	h.gen.Store(g)
	st.Store(g<<1 | 1)
	p.leases.Add(1)
	return h, nil
}

// ReleaseIndex releases slot i if it is leased under generation gen: the
// form a client acknowledgement (index, gen) takes. A stale or repeated ack
// returns ErrNotLeased and changes nothing.
func (p *Pool) ReleaseIndex(i int, gen uint64) error {
	if i < 0 || i >= p.n {
		return &SlotError{Op: "release", Index: i, Gen: gen, Err: ErrBadIndex}
	}
	return p.release(int32(i), gen)
}

func (p *Pool) release(i int32, g uint64) error {
	if g == 0 || !p.state[i].CompareAndSwap(g<<1|1, g<<1) {
		return &SlotError{Op: "release", Index: int(i), Gen: g, Err: ErrNotLeased}
	}
	p.releases.Add(1)
	p.free <- i
	p.dropUse()
	return nil
}

// dropUse lowers the in-use count; the last release after CloseForce unmaps.
func (p *Pool) dropUse() {
	if p.use.Add(-1) == closedBit {
		p.unmap()
	}
}

// Slot returns the handle of slot i if it is leased under generation gen,
// so the daemon can go from a client's (index, gen) back to the slot.
func (p *Pool) Slot(i int, gen uint64) (*Slot, error) {
	if i < 0 || i >= p.n {
		return nil, &SlotError{Op: "slot", Index: i, Gen: gen, Err: ErrBadIndex}
	}
	if gen == 0 || p.state[i].Load() != gen<<1|1 {
		return nil, &SlotError{Op: "slot", Index: i, Gen: gen, Err: ErrNotLeased}
	}
	return &p.handles[i*HandleRing+int(gen%HandleRing)], nil
}

// Close unmaps the region if no slot is leased; otherwise it returns an
// error wrapping ErrBusy and the pool stays open. Closing a closed pool
// returns ErrClosed. Blocked Leases wake with ErrClosed.
func (p *Pool) Close() error {
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	if p.closed.Load() {
		return ErrClosed
	}
	// Take every slot off the free list: owning them all proves none is
	// leased and keeps any Lease from slipping in before closed is set.
	got := make([]int32, 0, p.n)
	for len(got) < p.n {
		select {
		case i := <-p.free:
			got = append(got, i)
			continue
		default:
		}
		for _, i := range got {
			p.free <- i
		}
		return fmt.Errorf("pinned: close %q: %d of %d slots leased: %w", p.name, p.n-len(got), p.n, ErrBusy)
	}
	p.closed.Store(true)
	p.use.Or(closedBit)
	close(p.done)
	return p.unmap()
}

// CloseForce closes the pool even with slots leased: Lease and TryLease fail
// from now on and blocked Leases wake with ErrClosed. The region is unmapped
// at once if no slot is leased, else when the last leased slot is released
// (Release or ReleaseIndex), so a holder never touches unmapped memory. A
// holder that never releases keeps the region mapped until the process ends.
func (p *Pool) CloseForce() error {
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	if p.closed.Load() {
		return ErrClosed
	}
	p.closed.Store(true)
	old := p.use.Or(closedBit)
	close(p.done)
	if old == 0 {
		return p.unmap()
	}
	return nil
}

func (p *Pool) unmap() error {
	p.unmapOnce.Do(func() {
		p.unmapped.Store(true)
		p.unmapErr = unmapMem(p.mem)
		if p.file != nil {
			if err := p.file.Close(); err != nil && p.unmapErr == nil {
				p.unmapErr = fmt.Errorf("pinned: close memfd: %w", err)
			}
		}
	})
	return p.unmapErr
}

// Locked reports whether the region is mlocked (page-locked). False means
// pageable memory: NoLock was set or mlock failed.
func (p *Pool) Locked() bool { return p.locked }

// Shared reports whether the region is a memfd another process can map.
func (p *Pool) Shared() bool { return p.shared }

// SlotSize is the page-rounded size of every slot in bytes.
func (p *Pool) SlotSize() int { return p.slotSize }

// Slots is the number of slots.
func (p *Pool) Slots() int { return p.n }

// Size is the region's size in bytes: Slots() * SlotSize(). A client maps
// this many bytes of Fd().
func (p *Pool) Size() int { return p.n * p.slotSize }

// Fd is the memfd backing a Shared pool, or -1. It stays owned by the pool
// and is closed when the region is unmapped; send it with SCM_RIGHTS (the
// receiver gets its own descriptor) or dup it before the pool closes.
func (p *Pool) Fd() int {
	if p.file == nil {
		return -1
	}
	return int(p.file.Fd())
}

// File is the memfd of a Shared pool as an *os.File, or nil. The pool owns
// it: do not close it.
func (p *Pool) File() *os.File { return p.file }

// OpenReadOnly returns a new read-only descriptor of a Shared pool's memfd,
// owned by the caller: the one to hand to a client. The memfd is sealed
// against writes, so no descriptor of it can change the region; this one
// cannot even be switched to writing.
func (p *Pool) OpenReadOnly() (*os.File, error) {
	if p.file == nil {
		return nil, fmt.Errorf("pinned: pool %q is not shared: %w", p.name, ErrBadConfig)
	}
	return openReadOnly(p.file)
}

// Stats is a snapshot of a pool's counters.
type Stats struct {
	Slots, SlotsInUse int
	SlotSize          int64 // page-rounded
	BytesMapped       int64 // 0 once unmapped
	BytesLocked       int64 // BytesMapped when Locked, else 0
	Locked, Shared    bool
	Leases, Releases  uint64 // successful ones since New
	Waits             uint64 // Leases that found no free slot and blocked
}

// Stats reads the counters; each is an atomic load, so it is cheap, but the
// fields are not one consistent snapshot under concurrent use.
func (p *Pool) Stats() Stats {
	s := Stats{
		Slots:      p.n,
		SlotsInUse: int(p.use.Load() &^ closedBit),
		SlotSize:   int64(p.slotSize),
		Locked:     p.locked,
		Shared:     p.shared,
		Leases:     p.leases.Load(),
		Releases:   p.releases.Load(),
		Waits:      p.waits.Load(),
	}
	if !p.unmapped.Load() {
		s.BytesMapped = int64(p.Size())
		if p.locked {
			s.BytesLocked = s.BytesMapped
		}
	}
	return s
}
