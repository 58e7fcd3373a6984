package server

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// What one connection may do (issue 29's rapid reset). A client opens a
// stream a rank, a few for a pool, and keeps each for an epoch or more.

// maxConnStreams bounds the streams one connection may have open at once
// (SETTINGS_MAX_CONCURRENT_STREAMS): gRPC runs at most this many handlers
// for it. It is high: when a connection reaches it gRPC stops reading that
// connection, resets included.
const maxConnStreams = 1000

// Streams a connection may reset before their header: a burst, then a
// steady rate. A client resets a stream early when it gives up on an
// Open, now and then; a connection past this is a flood (an HTTP/2 rapid
// reset), and tapStreams refuses its new streams as their headers arrive,
// before gRPC gives them a goroutine, until the bucket fills again.
const (
	connResetBurst = 100
	connResetRate  = 100 // a second
)

// connUnprovenBytes bounds the batch memory a connection's unproven
// streams may hold: opened, and not yet answered by their client with an
// Ack or a Want. A flood whose client never reads its socket stalls gRPC's
// reading of that connection, so its resets go unseen and each stream it
// opened looks alive; this keeps what such streams hold to a bound per
// connection. One stream is always let through, whatever its size.
const connUnprovenBytes = 256 << 20

// creditWindow is how long a new stream's loader plans nothing
// (loader.Config.HoldUntilWiden) unless its client answers the header
// sooner, as loaderd's clients do at once (an empty Ack): a rapid-reset
// flood's streams that get as far as a header are dropped within it, at
// no cost to the workers. A client that does not answer (an older one)
// waits this once, at the stream's start.
const creditWindow = 25 * time.Millisecond

// tapStreams is the gRPC servers' InTapHandle: it runs on the connection's
// reader for every new stream, so it must be quick.
func (s *Server) tapStreams(ctx context.Context, info *tap.Info) (context.Context, error) {
	if info.FullMethodName != pb.Loader_Stream_FullMethodName {
		return ctx, nil
	}
	if c := connRefsOf(ctx); c != nil && !c.resets.ok(time.Now()) {
		s.metrics.opensRefused.Inc()
		s.earlyEnd(c, peerAddr(ctx)) // a refused stream counts as one reset early
		return nil, status.Errorf(codes.ResourceExhausted,
			"loaderd: this connection reset more than %d streams a second before their header (a rapid-reset flood); new streams are refused for a while", connResetRate)
	}
	return ctx, nil
}

// resetRate is one connection's token bucket of early resets. It is safe
// for concurrent use.
type resetRate struct {
	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// refillLocked brings the bucket to now.
func (r *resetRate) refillLocked(now time.Time) {
	if r.last.IsZero() {
		r.tokens = connResetBurst
	} else {
		r.tokens = min(connResetBurst, r.tokens+now.Sub(r.last).Seconds()*connResetRate)
	}
	r.last = now
}

// ok reports whether the connection may start a stream now.
func (r *resetRate) ok(now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refillLocked(now)
	return r.tokens >= 1
}

// demoted reports whether the connection is over its rate now.
func (r *resetRate) demoted(now time.Time) bool { return !r.ok(now) }

// Demoted implements loader.Demoter: a connection over its early-reset
// rate gets workers only when no other client has work queued.
func (c *connRefs) Demoted() bool { return c.resets.demoted(time.Now()) }

// spend counts an early reset, and reports whether the bucket is at its
// floor, a burst below empty: a connection that kept resetting
// streams past its allowance, refused all the while, is a flood and no
// client (earlyEnd).
func (r *resetRate) spend(now time.Time) (floor bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refillLocked(now)
	r.tokens = max(r.tokens-1, -connResetBurst)
	return r.tokens <= -connResetBurst
}

// earlyEnd counts a stream of c that ended before its header, and closes
// c once it is a flood: gRPC then stops reading it, and the peer's new
// connections are refused for a while (floodPeers). While that peer is
// refused, its other connections are closed at their first early reset:
// a flood comes over several at once.
func (s *Server) earlyEnd(c *connRefs, peer string) {
	now := time.Now()
	floor := c.resets.spend(now)
	if (floor || s.floods.refused(c.closer.key(), now)) && c.closer.close() {
		s.metrics.floodsClosed.Inc()
		penalty := s.floods.strike(c.closer.key(), now)
		s.log.Warn("closed a connection that reset streams before their header faster than a client does (an HTTP/2 rapid-reset flood); the peer's new connections are refused for a while",
			"peer", peer, "rate", connResetRate, "refused_for", penalty)
	}
}

// reserveUnproven counts n bytes of a new stream's pool as unproven on c,
// waiting while c's unproven streams hold connUnprovenBytes already; ctx
// ends the wait. The caller gives the bytes back with releaseUnproven.
func (c *connRefs) reserveUnproven(ctx context.Context, n int64) error {
	for {
		c.mu.Lock()
		if c.unproven == 0 || c.unproven+n <= connUnprovenBytes {
			c.unproven += n
			c.mu.Unlock()
			return nil
		}
		if c.fewer == nil {
			c.fewer = make(chan struct{})
		}
		fewer := c.fewer
		c.mu.Unlock()
		select {
		case <-fewer:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (c *connRefs) releaseUnproven(n int64) {
	c.mu.Lock()
	c.unproven -= n
	if c.fewer != nil {
		close(c.fewer)
		c.fewer = nil
	}
	c.mu.Unlock()
}

// peerAddr is the client's address for the log ("" for an unnamed Unix
// socket peer, or where gRPC has not said).
func peerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}
