package pinned

import "sync/atomic"

// Slot is a handle to one leased slot, valid from Lease until its Release.
// Handles are preallocated and reused (HandleRing per slot), so keep the
// handle only while the lease lasts; refer to a lease elsewhere (for example
// in a client ack) by Index and Gen.
type Slot struct {
	p   *Pool
	b   []byte
	off int
	idx int32
	gen atomic.Uint64
}

// Index is the slot's position in the pool, 0 <= Index < Slots().
func (s *Slot) Index() int { return int(s.idx) }

// Offset is the slot's byte offset in the region: page-aligned, and what a
// shared-memory reference carries to the client.
func (s *Slot) Offset() int { return s.off }

// Gen is the generation of the lease this handle was issued for. Index and
// Gen together name the lease for ReleaseIndex.
func (s *Slot) Gen() uint64 { return s.gen.Load() }

// Pool is the pool the slot belongs to.
func (s *Slot) Pool() *Pool { return s.p }

// Bytes is the slot's memory: SlotSize() bytes starting page-aligned. It is
// nil once the region is unmapped.
func (s *Slot) Bytes() []byte {
	if s.p == nil || s.p.unmapped.Load() {
		return nil
	}
	return s.b
}

// Release returns the slot to the pool. Releasing twice, or through a stale
// handle whose slot has since been leased again, returns an error wrapping
// ErrNotLeased and leaves the pool untouched. It allocates nothing on success.
func (s *Slot) Release() error {
	if s == nil || s.p == nil {
		return &SlotError{Op: "release", Index: -1, Err: ErrNotLeased}
	}
	return s.p.release(s.idx, s.gen.Load())
}
