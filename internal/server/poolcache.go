package server

import (
	"sync"

	"github.com/loaderd/loaderd/pinned"
)

// poolCache keeps the pinned pools of ended streams for reuse. Mapping and
// faulting in a fresh pool costs about 10 µs a page here (30 ms for four
// batches of 256 f32 images), so a client that reconnects, or the next
// epoch's stream, should get memory that is already warm.
type poolCache struct {
	mu   sync.Mutex
	max  int
	idle []*pinned.Pool
}

func newPoolCache(max int) *poolCache { return &poolCache{max: max} }

// get returns a pool with exactly slots slots of at least slotSize bytes.
func (c *poolCache) get(slotSize, slots int, shared bool) (*pinned.Pool, error) {
	c.mu.Lock()
	for i, p := range c.idle {
		if p.Slots() == slots && p.SlotSize() >= slotSize && p.Shared() == shared &&
			p.SlotSize() <= 2*slotSize+4096 {
			c.idle = append(c.idle[:i], c.idle[i+1:]...)
			c.mu.Unlock()
			return p, nil
		}
	}
	c.mu.Unlock()
	return pinned.New(pinned.Config{SlotSize: slotSize, Slots: slots, Shared: shared, Name: "loaderd-stream"})
}

// put keeps p for reuse, evicting the oldest idle pool when full. A
// shared pool is never reused: the client that mapped it may still read it.
func (c *poolCache) put(p *pinned.Pool) {
	if p.Shared() || p.Stats().SlotsInUse != 0 {
		p.CloseForce()
		return
	}
	c.mu.Lock()
	c.idle = append(c.idle, p)
	var evict *pinned.Pool
	if len(c.idle) > c.max {
		evict = c.idle[0]
		c.idle = c.idle[1:]
	}
	c.mu.Unlock()
	if evict != nil {
		evict.CloseForce()
	}
}

func (c *poolCache) close() {
	c.mu.Lock()
	idle := c.idle
	c.idle = nil
	c.mu.Unlock()
	for _, p := range idle {
		p.CloseForce()
	}
}
