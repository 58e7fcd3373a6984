package pinned

import "context"

// STUB: signatures fixed; the bodies are being written.

// Config sizes a pool.
type Config struct {
	SlotSize int  // bytes per slot, rounded up to a page
	Slots    int  // number of slots
	Shared   bool // back the region with a memfd another process can map
	NoLock   bool // do not try mlock
	Name     string
}

// Pool is one region cut into fixed slots.
type Pool struct{}

// Slot is one leased slot.
type Slot struct{}

// New maps the region.
func New(cfg Config) (*Pool, error) { panic("stub") }

// Lease blocks until a slot is free or ctx is done.
func (p *Pool) Lease(ctx context.Context) (*Slot, error) { panic("stub") }

// Release returns s to the pool.
func (s *Slot) Release() error { panic("stub") }

// Bytes returns the slot's memory.
func (s *Slot) Bytes() []byte { panic("stub") }

// Close unmaps the region.
func (p *Pool) Close() error { panic("stub") }
