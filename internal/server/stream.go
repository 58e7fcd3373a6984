package server

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loaderd/loaderd/loader"
	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// Stream serves one client: an Open, then batches in order within the
// client's window of unacknowledged batches.
func (s *Server) Stream(st pb.Loader_StreamServer) (err error) {
	conn := connRefsOf(st.Context())
	headed := false // the header went out
	if conn != nil {
		defer func() { // a reset before the header counts against the connection (tapStreams)
			if !headed && st.Context().Err() != nil {
				s.earlyEnd(conn, peerAddr(st.Context()))
			}
		}()
	}
	first, err := st.Recv()
	if err != nil {
		return err
	}
	o := first.GetOpen()
	if o == nil {
		got := "an empty message"
		switch {
		case first.GetAck() != nil:
			got = "an Ack"
		case first.GetWant() != nil:
			got = "a Want"
		}
		return status.Errorf(codes.InvalidArgument, "loaderd: the first message of a stream must be Open, got %s", got)
	}
	if err := st.Context().Err(); err != nil { // reset already: take nothing
		return status.FromContextError(err).Err()
	}
	select {
	case <-s.stopping:
		return status.Errorf(codes.Unavailable, "loaderd: %v", errStopping)
	default:
	}
	p, err := s.validate(o)
	if err != nil {
		return err
	}
	// Streams the client has not answered yet hold a bounded share of
	// memory per connection (see reserveUnproven); the first Ack or Want
	// gives theirs back.
	proven := func() {}
	if conn != nil {
		n := poolBytes(p.cfg.BatchSize*p.pipe.Out().Bytes(), p.cfg.InFlight)
		if err := conn.reserveUnproven(st.Context(), n); err != nil {
			return status.FromContextError(err).Err()
		}
		proven = sync.OnceFunc(func() { conn.releaseUnproven(n) })
		defer proven()
	}
	// Wait for a turn at the costly part; a stream reset meanwhile costs
	// nothing more (see openGate).
	if err := s.opens.acquire(st.Context(), connKey(conn)); err != nil {
		return status.FromContextError(err).Err()
	}
	gated := true
	ungate := func() {
		if gated {
			gated = false
			s.opens.release()
		}
	}
	defer ungate()
	if err := st.Context().Err(); err != nil { // reset while it waited
		return status.FromContextError(err).Err()
	}
	if !s.acquireStream() {
		return status.Errorf(codes.ResourceExhausted, "loaderd: already serving %d streams", s.opts.MaxStreams)
	}
	defer s.releaseStream()
	pool, err := s.slots.get(p.cfg.BatchSize*p.pipe.Out().Bytes(), p.cfg.InFlight, p.shm)
	if err != nil {
		return status.Errorf(codes.ResourceExhausted, "loaderd: a stream of batches of %d × %d bytes: %v (--memory-limit)",
			p.cfg.BatchSize, p.pipe.Out().Bytes(), err)
	}
	p.cfg.Pinned = pool
	p.cfg.Tenant = connKey(conn) // a client's streams share the workers as one
	p.cfg.HoldUntilWiden = true  // until the client answers, or creditWindow passes
	m := s.metrics.forDataset(p.ds.Name)
	log := s.log.With("client", cut(o.GetClientName(), 64), "dataset", p.ds.Name, "rank", p.cfg.Rank, "world", p.cfg.World)
	p.cfg.OnSkip = func(e loader.SkipEvent) {
		m.sampleErrors.Inc()
		log.Warn("skipped an unreadable sample", "epoch", e.Epoch, "batch", e.Batch, "index", e.Index,
			"substitute", e.Substitute, "skipped", e.Skipped, "err", e.Err)
	}
	l, err := loader.New(s.pool, p.cfg)
	if err != nil {
		s.slots.put(pool)
		return status.Errorf(codes.InvalidArgument, "%v", err)
	}
	ungate()
	if err := st.Context().Err(); err != nil { // reset while the pool was mapped
		l.Close()
		s.slots.put(pool)
		return status.FromContextError(err).Err()
	}
	s.metrics.slotsLeased.Add(float64(pool.Slots()))
	ss := newSession(s, st, p, pool, l, m, cut(o.GetClientName(), 64))
	ss.proven = func() { proven(); l.Widen() }
	// A client may hold several batches before its first Ack: a stream
	// still open creditWindow after its header is no flood's either.
	widen := time.AfterFunc(creditWindow, l.Widen)
	defer widen.Stop()
	s.metrics.streams.Inc()
	defer s.metrics.streams.Dec()
	defer ss.end()
	log.Info("stream opened", "batch", p.cfg.BatchSize, "transport", transportName(p.shm), "start", p.cfg.Start, "in_flight", p.inFlight)
	defer func() { // every "stream opened" gets its "stream ended"
		if p.cfg.OnDemand { // its client knows what it asked for; there is no resume point
			log.Info("stream ended", "sent", ss.sent, "on_demand", true, "err", err)
		} else {
			log.Info("stream ended", "sent", ss.sent, "next", ss.resumeAt(), "err", err)
		}
	}()
	if err = st.Send(&pb.StreamReply{Msg: &pb.StreamReply_Header{Header: header(p, l, ss.tr)}}); err != nil {
		return err
	}
	headed = true
	ctx, cancel := context.WithCancel(st.Context())
	defer cancel()
	if ss.lane != nil {
		// A client that stops reading its lane blocks a frame's write once
		// the socket's buffer is full (a batch's fields can be MiBs): the
		// stream's end, or the server's stop, closes the lane under it.
		stop := context.AfterFunc(ctx, ss.lane.close)
		defer stop()
	}
	go func() {
		select {
		case <-s.stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	go ss.receive()
	if err = ss.run(ctx); err == nil && ss.lane != nil {
		err = ss.lane.finish()
	}
	return err
}

func transportName(shm bool) string {
	if shm {
		return "shm"
	}
	return "inline"
}

// cut shortens a client-supplied string for the logs.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
