package server

import (
	"context"
	"runtime"
	"sync"
)

// openGate bounds how many Opens do their costly part at once — mapping
// and prefaulting the batch pool, starting the loader — and serves
// waiting connections in turn.
//
// It is part of the daemon's answer to an HTTP/2 rapid reset with an Open
// in each stream (issue 29): without it every such stream ran its Open at
// once, each mapping a pool its client had already abandoned, and a normal
// client's Open queued behind thousands. With it, an Open waits in its
// connection's queue; a stream reset meanwhile leaves the queue having cost
// nothing, and one connection's flood takes at most its turn of the gate,
// never the others'.
//
// It is safe for concurrent use.
type openGate struct {
	mu    sync.Mutex
	free  int                // places not held
	conns map[any]*gateQueue // connections with waiters
	ring  []any              // those connections, served in turn
	next  int                // ring position of the next to serve
}

type gateQueue struct{ waiters []*gateWaiter }

type gateWaiter struct {
	ready chan struct{} // closed when the waiter holds a place
}

// gateWidth is how many Opens may run at once: one a core, and at least
// two so that one slow Open (a large pool to prefault) never stops the
// rest.
func gateWidth() int { return min(max(runtime.GOMAXPROCS(0), 2), 16) }

func newOpenGate(width int) *openGate {
	return &openGate{free: width, conns: map[any]*gateQueue{}}
}

// acquire takes a place for an Open on connection conn (any comparable
// key; nil groups callers without one), waiting in conn's queue while the
// gate is full. It returns ctx's error, holding nothing, if ctx ends first.
func (g *openGate) acquire(ctx context.Context, conn any) error {
	g.mu.Lock()
	if g.free > 0 && len(g.ring) == 0 {
		g.free--
		g.mu.Unlock()
		return nil
	}
	w := &gateWaiter{ready: make(chan struct{})}
	q := g.conns[conn]
	if q == nil {
		q = &gateQueue{}
		g.conns[conn] = q
		g.ring = append(g.ring, conn)
	}
	q.waiters = append(q.waiters, w)
	g.handOutLocked()
	g.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-w.ready: // granted as ctx ended: give the place back
		g.free++
		g.handOutLocked()
	default:
		g.removeLocked(conn, w)
	}
	return ctx.Err()
}

// release gives back a place taken by acquire.
func (g *openGate) release() {
	g.mu.Lock()
	g.free++
	g.handOutLocked()
	g.mu.Unlock()
}

// handOutLocked grants free places to waiters, one connection at a time
// in ring order, passing over demoted connections (a flood's: see
// connRefs.Demoted) while others wait. The caller holds g.mu.
func (g *openGate) handOutLocked() {
	for g.free > 0 && len(g.ring) > 0 {
		if g.next >= len(g.ring) {
			g.next = 0
		}
		for i := range g.ring {
			if j := (g.next + i) % len(g.ring); !isDemoted(g.ring[j]) {
				g.next = j
				break
			}
		}
		q := g.conns[g.ring[g.next]]
		w := q.waiters[0]
		q.waiters[0] = nil
		q.waiters = q.waiters[1:]
		g.free--
		close(w.ready)
		if len(q.waiters) == 0 {
			g.dropLocked(g.next)
		} else {
			g.next++
		}
	}
}

// removeLocked takes w out of conn's queue (it gave up waiting).
func (g *openGate) removeLocked(conn any, w *gateWaiter) {
	q := g.conns[conn]
	if q == nil {
		return
	}
	for i, x := range q.waiters {
		if x == w {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			break
		}
	}
	if len(q.waiters) > 0 {
		return
	}
	for i, c := range g.ring {
		if c == conn {
			g.dropLocked(i)
			return
		}
	}
}

// dropLocked removes ring entry i, whose queue is empty, keeping the
// turn on the entry that followed it.
func (g *openGate) dropLocked(i int) {
	delete(g.conns, g.ring[i])
	copy(g.ring[i:], g.ring[i+1:])
	g.ring[len(g.ring)-1] = nil
	g.ring = g.ring[:len(g.ring)-1]
	if g.next > i {
		g.next--
	}
}

// connKey names a connection for the gate and the workers' turns: its
// connRefs (connTracker), or nil for a context that has none.
func connKey(c *connRefs) any {
	if c != nil {
		return c
	}
	return nil
}

func isDemoted(conn any) bool {
	d, ok := conn.(interface{ Demoted() bool })
	return ok && d.Demoted()
}
