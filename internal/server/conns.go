package server

import (
	"context"
	"sync"

	"google.golang.org/grpc/stats"
)

// connTracker is a stats.Handler that gives every connection a connRefs
// in its context, and ends it when the connection ends.
//
// gRPC frees every buffer it writes, and those of a stream it cleans up;
// the frames still queued on a connection that dies are never freed. By
// the time gRPC reports ConnEnd, the connection's writer has returned (the
// reader waits for it before the connection is reported ended), so
// nothing can read those frames again: their slots, and the budget of the
// pools they pin, can come back at once instead of at a garbage collection
// that a quiet daemon may not run for minutes.
type connTracker struct{}

type connRefsKey struct{}

func (connTracker) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	c := &connRefs{refs: map[*slotRef]struct{}{}}
	if a, ok := info.RemoteAddr.(*connAddr); ok { // from a trackListener (connclose.go)
		c.closer = &connCloser{conn: a.conn, peer: a.key}
	}
	return context.WithValue(ctx, connRefsKey{}, c)
}

func (connTracker) HandleConn(ctx context.Context, s stats.ConnStats) {
	if _, ok := s.(*stats.ConnEnd); ok {
		if c := connRefsOf(ctx); c != nil {
			c.end()
		}
	}
}

func (connTracker) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (connTracker) HandleRPC(context.Context, stats.RPCStats)                       {}

// connRefsOf returns the connection's slot references (nil for a context
// that did not come through connTracker).
func connRefsOf(ctx context.Context) *connRefs {
	c, _ := ctx.Value(connRefsKey{}).(*connRefs)
	return c
}

// connRefs holds the slots lent to gRPC on one connection and not yet
// given back. It is safe for concurrent use.
type connRefs struct {
	mu     sync.Mutex
	ended  bool
	refs   map[*slotRef]struct{}
	resets resetRate   // streams reset before their header (see tapStreams)
	closer *connCloser // ends the connection (a flood's); nil off a trackListener

	// Pool bytes of streams whose client has not answered yet (unproven),
	// and a channel closed when they fall (see reserveUnproven).
	unproven int64
	fewer    chan struct{}
}

// add tracks r; it reports false when the connection has already ended,
// and then the caller releases r once gRPC has returned from sending it.
func (c *connRefs) add(r *slotRef) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return false
	}
	c.refs[r] = struct{}{}
	r.conn = c
	return true
}

func (c *connRefs) remove(r *slotRef) {
	c.mu.Lock()
	delete(c.refs, r)
	c.mu.Unlock()
}

// end releases every slot still lent on the connection.
func (c *connRefs) end() {
	c.mu.Lock()
	c.ended = true
	refs := c.refs
	c.refs = nil
	c.mu.Unlock()
	for r := range refs {
		r.release()
	}
}

func (c *connRefs) isEnded() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ended
}
