package server

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loaderd/loaderd/loader"
	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
	"github.com/loaderd/loaderd/sampler"
)

// Stream serves one client: an Open, then batches in order within the
// client's window of unacknowledged batches.
func (s *Server) Stream(st pb.Loader_StreamServer) error {
	first, err := st.Recv()
	if err != nil {
		return err
	}
	o := first.GetOpen()
	if o == nil {
		return status.Error(codes.InvalidArgument, "loaderd: the first message of a stream must be Open")
	}
	select {
	case <-s.stopping:
		return status.Errorf(codes.Unavailable, "loaderd: %v", errStopping)
	default:
	}
	if !s.acquireStream() {
		return status.Errorf(codes.ResourceExhausted, "loaderd: already serving %d streams", s.opts.MaxStreams)
	}
	defer s.releaseStream()
	p, err := s.validate(o)
	if err != nil {
		return err
	}
	slots, err := s.slots.get(p.cfg.BatchSize*p.pipe.Out().Bytes(), p.cfg.InFlight, p.shm)
	if err != nil {
		return status.Errorf(codes.ResourceExhausted, "loaderd: batch memory: %v", err)
	}
	p.cfg.Pinned = slots
	m := s.metrics.forDataset(p.ds.Name)
	log := s.log.With("client", o.GetClientName(), "dataset", p.ds.Name, "rank", p.cfg.Rank, "world", p.cfg.World)
	p.cfg.OnSkip = func(e loader.SkipEvent) {
		m.sampleErrors.Inc()
		log.Warn("skipped an unreadable sample", "epoch", e.Epoch, "batch", e.Batch, "index", e.Index,
			"substitute", e.Substitute, "skipped", e.Skipped, "err", e.Err)
	}
	l, err := loader.New(s.pool, p.cfg)
	if err != nil {
		s.slots.put(slots, nil)
		return status.Errorf(codes.InvalidArgument, "%v", err)
	}
	ss := &session{srv: s, st: st, l: l, p: p, m: m,
		pending: make([]pending, p.inFlight), credit: make(chan struct{}, p.inFlight), recvErr: make(chan error, 1)}
	for range p.inFlight {
		ss.credit <- struct{}{}
	}
	s.metrics.streams.Inc()
	s.metrics.slotsLeased.Add(float64(p.cfg.InFlight))
	log.Info("stream opened", "batch", p.cfg.BatchSize, "transport", h(p.shm), "start", p.cfg.Start, "in_flight", p.inFlight)
	defer func() {
		// Stop the loader first: releasing the unacked batches must not
		// plan new ones into slots the client may still be reading.
		l.Close()
		ss.close()
		// gRPC may still be copying inline tensors out of their slots:
		// the cache hands the pool out again only once that is over.
		s.slots.put(slots, &ss.sends)
		s.metrics.streams.Dec()
		s.metrics.slotsLeased.Sub(float64(p.cfg.InFlight))
	}()

	if err := st.Send(&pb.StreamReply{Msg: &pb.StreamReply_Header{Header: header(p, l, slots)}}); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(st.Context())
	defer cancel()
	go func() {
		select {
		case <-s.stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	go ss.receive()
	err = ss.send(ctx)
	log.Info("stream ended", "sent", ss.sent, "next", ss.resumeAt(), "err", err)
	return err
}

func h(shm bool) string {
	if shm {
		return "shm"
	}
	return "inline"
}

type pending struct {
	used bool
	seq  uint64
	b    *loader.Batch // held until acked (shared memory only)
}

// session is one stream's state shared by its sender and receiver.
type session struct {
	srv *Server
	st  pb.Loader_StreamServer
	l   *loader.Loader
	p   *plan
	m   streamMetrics

	mu      sync.Mutex
	closed  bool
	pending []pending // indexed by seq % window
	credit  chan struct{}
	recvErr chan error

	sends atomic.Int64 // inline tensors handed to gRPC and not yet released

	sent int64
	next sampler.Position // resume point: the batch after the last one sent
}

// receive reads acks until the stream ends.
func (ss *session) receive() {
	for {
		msg, err := ss.st.Recv()
		if err != nil {
			ss.recvErr <- err
			return
		}
		ack := msg.GetAck()
		if ack == nil {
			ss.recvErr <- status.Error(codes.InvalidArgument, "loaderd: Open sent twice on one stream")
			return
		}
		for _, seq := range ack.GetSeqs() {
			if err := ss.ack(seq); err != nil {
				ss.recvErr <- err
				return
			}
		}
	}
}

func (ss *session) ack(seq uint64) error {
	ss.mu.Lock()
	if ss.closed {
		ss.mu.Unlock()
		return nil
	}
	e := &ss.pending[seq%uint64(len(ss.pending))]
	if !e.used || e.seq != seq {
		ss.mu.Unlock()
		return status.Errorf(codes.InvalidArgument, "loaderd: ack of batch %d, which is not awaiting one", seq)
	}
	b := e.b
	*e = pending{}
	ss.mu.Unlock()
	if b != nil {
		b.Release()
	}
	ss.srv.metrics.inFlight.Dec()
	ss.credit <- struct{}{}
	return nil
}

// close releases every batch still awaiting an ack.
func (ss *session) close() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.closed = true
	for i := range ss.pending {
		if ss.pending[i].used {
			ss.srv.metrics.inFlight.Dec()
			if b := ss.pending[i].b; b != nil {
				b.Release()
			}
		}
		ss.pending[i] = pending{}
	}
}

// send streams batches until the loader ends, the client goes, or the
// server stops.
func (ss *session) send(ctx context.Context) error {
	reply := &pb.StreamReply{}
	batch := &pb.Batch{}
	reply.Msg = &pb.StreamReply_Batch{Batch: batch}
	out := ss.p.pipe.Out()
	shape := append([]int64{0}, int64(out.Shape()[0]), int64(out.Shape()[1]), int64(out.Shape()[2]))
	shm := &pb.Batch_Shm{Shm: &pb.ShmRef{}}
	// One outBatch per pinned slot: a slot's outBatch is reused only after
	// gRPC has released it, since the slot's batch comes back only then.
	outs := make([]outBatch, ss.p.cfg.Pinned.Slots())
	var params *pb.AugmentParams
	if ss.p.cfg.WithParams {
		params = &pb.AugmentParams{}
	}
	for {
		if err := ss.wait(ctx, ss.credit); err == errClientDone {
			return nil
		} else if err != nil {
			return err
		}
		t0 := time.Now()
		b, err := ss.l.Next(ctx)
		if err == io.EOF {
			ss.credit <- struct{}{} // the token taken for a batch that never came
			return ss.drain(ctx)
		}
		if err != nil {
			return ss.fail(ctx, err)
		}
		ss.m.wait.Observe(time.Since(t0).Seconds())

		shape[0] = int64(b.Len())
		*batch = pb.Batch{Seq: uint64(b.Seq), Epoch: b.Epoch, BatchIndex: b.Index, Indices: b.Indices,
			Labels: b.Labels, Dtype: pb.DType(out.DType), Layout: pb.Layout(out.Layout), Shape: shape}
		if ss.p.shm {
			*shm.Shm = pb.ShmRef{Slot: uint32(b.Slot.Index()), Generation: b.Slot.Gen(),
				Offset: int64(b.Slot.Offset()), Length: int64(len(b.Data))}
			batch.Tensor = shm
		}
		if params != nil {
			params.Top, params.Left, params.Flip = params.Top[:0], params.Left[:0], params.Flip[:0]
			for _, pr := range b.Params {
				params.Top = append(params.Top, pr.Top)
				params.Left = append(params.Left, pr.Left)
				params.Flip = append(params.Flip, pr.Flip)
			}
			batch.Params = params
		}
		ss.mu.Lock()
		e := &ss.pending[uint64(b.Seq)%uint64(len(ss.pending))]
		*e = pending{used: true, seq: uint64(b.Seq)}
		if ss.p.shm {
			e.b = b
		}
		ss.mu.Unlock()
		ss.srv.metrics.inFlight.Inc()
		// Once sent, b belongs to gRPC or the client's ack: read it first.
		next, n := sampler.Position{Epoch: b.Epoch, Batch: b.Index + 1}, b.Len()
		if ss.p.shm {
			err = ss.st.Send(reply)
		} else {
			// The codec sends the tensor from its slot; gRPC releases the
			// batch when the bytes are written.
			ob := &outs[b.Slot.Index()]
			ob.batch, ob.data, ob.b, ob.sends = batch, b.Data, b, &ss.sends
			ss.sends.Add(1)
			err = ss.st.SendMsg(ob)
		}
		if err != nil {
			return err
		}
		ss.sent++
		ss.next = next
		ss.m.images.Add(float64(n))
		ss.m.batches.Inc()
	}
}

// wait takes one token from ch, or reports why the stream must end.
func (ss *session) wait(ctx context.Context, ch chan struct{}) error {
	select {
	case <-ch:
		return nil
	case err := <-ss.recvErr:
		ss.recvErr <- err // later waits see it too
		if err == io.EOF {
			return errClientDone
		}
		return err
	case <-ctx.Done():
		return ss.ctxErr(ctx)
	}
}

// errClientDone: the client half-closed its side, which asks the server
// to stop; the stream ends with OK.
var errClientDone = errors.New("client closed its side")

// drain waits for the last acks so shared-memory slots stay valid until
// the client is done with them.
func (ss *session) drain(ctx context.Context) error {
	timer := time.NewTimer(ss.srv.opts.AckTimeout)
	defer timer.Stop()
	for range len(ss.pending) {
		select {
		case <-ss.credit:
		case err := <-ss.recvErr:
			if err == io.EOF {
				return nil
			}
			return err
		case <-ctx.Done():
			return ss.ctxErr(ctx)
		case <-timer.C:
			return status.Error(codes.DeadlineExceeded, "loaderd: stream finished but the client did not acknowledge its last batches")
		}
	}
	return nil
}

func (ss *session) fail(ctx context.Context, err error) error {
	var se *loader.SampleError
	switch {
	case errors.As(err, &se):
		ss.m.sampleErrors.Inc()
		ss.srv.log.Error("sample failed", "err", err)
		return status.Errorf(codes.DataLoss, "%v", err)
	case ctx.Err() != nil:
		return ss.ctxErr(ctx)
	}
	return status.Errorf(codes.Internal, "%v", err)
}

func (ss *session) ctxErr(ctx context.Context) error {
	select {
	case <-ss.srv.stopping:
		return status.Errorf(codes.Unavailable, "loaderd: %v; resume from %s", errStopping, ss.resumeAt())
	default:
	}
	return status.FromContextError(ctx.Err()).Err()
}

func (ss *session) resumeAt() sampler.Position {
	if ss.sent == 0 {
		return ss.p.cfg.Start
	}
	if ss.next.Batch >= ss.l.BatchesPerEpoch() {
		return sampler.Position{Epoch: ss.next.Epoch + 1}
	}
	return ss.next
}
