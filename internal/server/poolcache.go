package server

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/loaderd/loaderd/pinned"

	"github.com/loaderd/loaderd/internal/bytesize"
)

// poolCache hands out the streams' pinned pools, each reserved in the
// memory budget before it is mapped, and keeps the pools of ended streams
// for reuse: mapping and faulting in a fresh pool costs about 10 µs a page
// here (30 ms for four batches of 256 f32 images), so a client that
// reconnects, or the next epoch's stream, should get memory that is
// already warm. A pool comes back only when nothing can read it any more
// (see session). Idle pools go after idleTTL, or at once when a new stream
// needs their memory.
type poolCache struct {
	budget  *budget
	max     int
	idleTTL time.Duration

	mu     sync.Mutex
	idle   []idlePool // oldest first
	closed bool       // the server stopped: pools that come back are unmapped
}

type idlePool struct {
	p     *pinned.Pool
	since time.Time
}

func newPoolCache(b *budget, max int, idleTTL time.Duration) *poolCache {
	return &poolCache{budget: b, max: max, idleTTL: idleTTL}
}

var pageSize = int64(os.Getpagesize())

// poolBytes is what pinned.New maps for slots slots of slotSize bytes.
func poolBytes(slotSize, slots int) int64 {
	return (int64(slotSize) + pageSize - 1) / pageSize * pageSize * int64(slots)
}

// get returns a pool with exactly slots slots of at least slotSize bytes
// (and not wastefully more), counted as stream memory.
func (c *poolCache) get(slotSize, slots int, shared bool) (*pinned.Pool, error) {
	c.mu.Lock()
	for i, e := range c.idle {
		p := e.p
		if p.Slots() == slots && p.SlotSize() >= slotSize && p.Shared() == shared && p.SlotSize() <= 2*slotSize+4096 {
			c.idle = append(c.idle[:i], c.idle[i+1:]...)
			c.mu.Unlock()
			c.budget.move(memIdle, memStream, int64(p.Size()))
			return p, nil
		}
	}
	c.mu.Unlock()
	need := poolBytes(slotSize, slots)
	for {
		err := c.budget.reserve(memStream, need)
		if err == nil {
			break
		}
		if !c.evictOldest() {
			return nil, fmt.Errorf("batch memory of %d slots of %s: %w", slots, bytesize.Format(int64(slotSize)), err)
		}
	}
	p, err := pinned.New(pinned.Config{SlotSize: slotSize, Slots: slots, Shared: shared, Name: "loaderd-stream"})
	if err != nil {
		c.budget.release(memStream, need)
		return nil, err
	}
	if d := int64(p.Size()) - need; d != 0 { // pinned rounds as poolBytes does; stay exact regardless
		c.budget.release(memStream, -d)
	}
	return p, nil
}

// put takes back a pool nothing reads any more. A shared pool is never
// reused: a client that mapped it may still read it, from its own mapping.
func (c *poolCache) put(p *pinned.Pool) {
	size := int64(p.Size())
	c.mu.Lock()
	if c.closed || p.Shared() || p.Stats().SlotsInUse != 0 {
		c.mu.Unlock()
		p.CloseForce()
		c.budget.release(memStream, size)
		return
	}
	c.idle = append(c.idle, idlePool{p: p, since: time.Now()})
	c.budget.move(memStream, memIdle, size)
	over := len(c.idle) > c.max
	c.mu.Unlock()
	if over {
		c.evictOldest()
	}
}

// evictOldest unmaps the oldest idle pool; false if there is none.
func (c *poolCache) evictOldest() bool {
	c.mu.Lock()
	if len(c.idle) == 0 {
		c.mu.Unlock()
		return false
	}
	e := c.idle[0]
	c.idle = c.idle[1:]
	c.mu.Unlock()
	size := int64(e.p.Size())
	e.p.CloseForce()
	c.budget.release(memIdle, size)
	return true
}

// expire unmaps the pools idle for longer than idleTTL.
func (c *poolCache) expire(now time.Time) {
	for {
		c.mu.Lock()
		old := len(c.idle) > 0 && now.Sub(c.idle[0].since) > c.idleTTL
		c.mu.Unlock()
		if !old || !c.evictOldest() {
			return
		}
	}
}

// janitor expires idle pools until done is closed.
func (c *poolCache) janitor(done <-chan struct{}) {
	t := time.NewTicker(max(c.idleTTL/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case now := <-t.C:
			c.expire(now)
		case <-done:
			return
		}
	}
}

// close unmaps every idle pool; pools that come back later are unmapped.
func (c *poolCache) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	for c.evictOldest() {
	}
}
