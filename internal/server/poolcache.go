package server

import (
	"sync"

	"github.com/loaderd/loaderd/pinned"
)

// poolCache keeps the pinned pools of ended streams for reuse. Mapping and
// faulting in a fresh pool costs about 10 µs a page here (30 ms for four
// batches of 256 f32 images), so a client that reconnects, or the next
// epoch's stream, should get memory that is already warm. A pool comes
// here only when nothing can read it any more (see session).
type poolCache struct {
	mu     sync.Mutex
	max    int
	idle   []*pinned.Pool // oldest first
	closed bool           // the server stopped: pools that come back are unmapped
}

func newPoolCache(max int) *poolCache { return &poolCache{max: max} }

// get returns a pool with exactly slots slots of at least slotSize bytes
// (and not wastefully more).
func (c *poolCache) get(slotSize, slots int, shared bool) (*pinned.Pool, error) {
	c.mu.Lock()
	for i, p := range c.idle {
		if p.Slots() == slots && p.SlotSize() >= slotSize && p.Shared() == shared && p.SlotSize() <= 2*slotSize+4096 {
			c.idle = append(c.idle[:i], c.idle[i+1:]...)
			c.mu.Unlock()
			return p, nil
		}
	}
	c.mu.Unlock()
	return pinned.New(pinned.Config{SlotSize: slotSize, Slots: slots, Shared: shared, Name: "loaderd-stream"})
}

// put takes back a pool nothing reads any more. A shared pool is never
// reused: a client that mapped it may still read it, from its own mapping.
func (c *poolCache) put(p *pinned.Pool) {
	c.mu.Lock()
	if c.closed || p.Shared() || p.Stats().SlotsInUse != 0 {
		c.mu.Unlock()
		p.CloseForce()
		return
	}
	c.idle = append(c.idle, p)
	var evict *pinned.Pool
	if len(c.idle) > c.max {
		evict, c.idle = c.idle[0], c.idle[1:]
	}
	c.mu.Unlock()
	if evict != nil {
		evict.CloseForce()
	}
}

// close unmaps every idle pool.
func (c *poolCache) close() {
	c.mu.Lock()
	idle := c.idle
	c.idle, c.closed = nil, true
	c.mu.Unlock()
	for _, p := range idle {
		p.CloseForce()
	}
}
