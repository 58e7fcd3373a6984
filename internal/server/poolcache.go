package server

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/loaderd/loaderd/pinned"
)

// poolCache keeps the pinned pools of ended streams for reuse. Mapping and
// faulting in a fresh pool costs about 10 µs a page here (30 ms for four
// batches of 256 f32 images), so a client that reconnects, or the next
// epoch's stream, should get memory that is already warm.
//
// A pool comes back while gRPC may still be copying an inline tensor out
// of it. It is handed out again only once gRPC has released every tensor,
// or after quarantine: gRPC drops, without reading or releasing, the data
// of a stream that is already gone, so after a short while nothing reads
// the pool any more.
type poolCache struct {
	mu   sync.Mutex
	max  int
	idle []idlePool
}

type idlePool struct {
	p     *pinned.Pool
	sends *atomic.Int64 // inline tensors gRPC still holds
	ended time.Time
}

const quarantine = 2 * time.Second

func (e idlePool) ready() bool {
	return e.sends == nil || e.sends.Load() == 0 || time.Since(e.ended) > quarantine
}

func newPoolCache(max int) *poolCache { return &poolCache{max: max} }

// get returns a pool with exactly slots slots of at least slotSize bytes.
func (c *poolCache) get(slotSize, slots int, shared bool) (*pinned.Pool, error) {
	c.mu.Lock()
	for i, e := range c.idle {
		p := e.p
		if p.Slots() == slots && p.SlotSize() >= slotSize && p.Shared() == shared &&
			p.SlotSize() <= 2*slotSize+4096 && e.ready() {
			c.idle = append(c.idle[:i], c.idle[i+1:]...)
			c.mu.Unlock()
			return p, nil
		}
	}
	c.mu.Unlock()
	return pinned.New(pinned.Config{SlotSize: slotSize, Slots: slots, Shared: shared, Name: "loaderd-stream"})
}

// put keeps p for reuse; sends counts the inline tensors gRPC may still
// read from it. A shared pool is never reused: the client that mapped it
// may still read it (and gRPC never reads it, so it can be unmapped now).
func (c *poolCache) put(p *pinned.Pool, sends *atomic.Int64) {
	if p.Shared() || p.Stats().SlotsInUse != 0 {
		p.CloseForce()
		return
	}
	c.mu.Lock()
	c.idle = append(c.idle, idlePool{p: p, sends: sends, ended: time.Now()})
	var evict *pinned.Pool
	if len(c.idle) > c.max {
		for i, e := range c.idle { // the oldest that nothing reads any more
			if e.ready() {
				evict = e.p
				c.idle = append(c.idle[:i], c.idle[i+1:]...)
				break
			}
		}
	}
	c.mu.Unlock()
	if evict != nil {
		evict.CloseForce()
	}
}

// close unmaps every idle pool; call it after gRPC has stopped.
func (c *poolCache) close() {
	c.mu.Lock()
	idle := c.idle
	c.idle = nil
	c.mu.Unlock()
	for _, e := range idle {
		e.p.CloseForce()
	}
}
