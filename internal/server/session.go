package server

import (
	"context"
	"errors"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/pinned"
	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
	"github.com/loaderd/loaderd/sampler"
)

// session is one Stream: its loader, its transport, its window of
// unacknowledged batches, and the one owner of its pinned pool.
//
// The pool is reference-counted. The session holds one reference while the
// RPC runs; each batch whose tensor someone may still read holds another:
// gRPC, for an inline batch it has not finished writing (dropped when gRPC
// frees the buffer), or the client, for a shared-memory batch it has not
// acknowledged (dropped at the ack, or when the stream ends: the client's
// own mapping outlives the daemon's). When the last reference goes, the
// pool returns to the server's cache, and only then may another stream
// write into it. No timers: whoever lets go last hands it back.
type session struct {
	srv   *Server
	st    pb.Loader_StreamServer
	l     *loader.Loader
	p     *plan
	m     streamMetrics
	stat  *streamStat // per-stream counters, and the client wait the autotuner reads
	tr    transport
	slots *streamSlots
	token []byte // the shared region's hand-over secret (see fdBroker)
	lane  *lane  // the client's lane (Open.shm_lane), or nil
	// proven is called at the client's first message after its Open
	// (reserveUnproven); it may be called again.
	proven func()

	mu      sync.Mutex
	closed  bool
	window  []unacked           // sent and not yet acknowledged, in no order; at most p.inFlight
	wanted  map[uint64]struct{} // on demand: numbers wanted and not yet acked
	unsent  int                 // on demand: numbers wanted and not yet sent
	credit  chan struct{}
	recvErr chan error
	recvEnd chan struct{} // closed when receive stops

	sent int64
	next sampler.Position // resume point: the batch after the last one sent
}

// unacked is a batch the client has not acknowledged; b is set while the
// client may read it from shared memory.
type unacked struct {
	seq uint64
	b   *loader.Batch
}

func newSession(srv *Server, st pb.Loader_StreamServer, p *plan, pool *pinned.Pool, l *loader.Loader, m streamMetrics, client string) *session {
	ss := &session{srv: srv, st: st, l: l, p: p, m: m,
		stat:   srv.live.open(p.ds.Name, client, p.cfg.Rank, p.cfg.World, p.inFlight, transportName(p.shm)),
		slots:  &streamSlots{pool: pool, cache: srv.slots, m: srv.metrics},
		window: make([]unacked, 0, p.inFlight), credit: make(chan struct{}, p.inFlight), recvErr: make(chan error, 1),
		recvEnd: make(chan struct{}), proven: func() {}}
	if p.cfg.OnDemand {
		ss.wanted = make(map[uint64]struct{}, p.inFlight)
	}
	ss.slots.refs.Store(1)
	if p.shm {
		ss.tr = shmTransport{ss}
		if srv.opts.FdSocket != "" {
			if p.lane {
				ss.lane = newLane()
				ss.tr = laneTransport{shmTransport{ss}}
			}
			ss.token = srv.fds.register(ss)
		}
	} else {
		ss.tr = inlineTransport{ss}
	}
	for range p.inFlight {
		ss.credit <- struct{}{}
	}
	return ss
}

// streamSlots is a stream's pinned pool and its reference count (see
// session). It must not reach the gRPC stream: the cleanup that covers
// buffers gRPC drops holds it, and would otherwise keep them alive.
type streamSlots struct {
	refs  atomic.Int64
	pool  *pinned.Pool
	cache *poolCache
	m     *metrics
}

func (s *streamSlots) retain() { s.refs.Add(1) }

// drop lets go of one reference; the last one hands the pool back.
func (s *streamSlots) drop() {
	if s.refs.Add(-1) == 0 {
		s.m.slotsLeased.Sub(float64(s.pool.Slots()))
		s.cache.put(s.pool)
	}
}

// end stops the loader (so no worker writes into the pool again), releases
// every batch the client had not acknowledged, and drops the session's
// own reference.
func (ss *session) end() {
	if ss.token != nil {
		ss.srv.fds.unregister(ss.token)
	}
	if ss.lane != nil {
		ss.lane.close()
	}
	ss.l.Close()
	ss.mu.Lock()
	ss.closed = true
	window := ss.window
	ss.window = nil
	ss.mu.Unlock()
	for _, e := range window {
		ss.srv.metrics.inFlight.Dec()
		ss.stat.window.Dec()
		if e.b != nil {
			ss.slots.drop()
		}
	}
	ss.srv.live.close(ss.stat)
	ss.slots.drop()
}

// receive reads acks, and on demand wants, until the stream ends.
func (ss *session) receive() {
	defer close(ss.recvEnd)
	for {
		msg, err := ss.st.Recv()
		if err != nil {
			ss.recvErr <- err
			return
		}
		ss.proven()
		if w := msg.GetWant(); w != nil {
			if err := ss.want(w.GetBatches()); err != nil {
				ss.recvErr <- err
				return
			}
			continue
		}
		ack := msg.GetAck()
		if ack == nil {
			what := "an empty message"
			if msg.GetOpen() != nil {
				what = "a second Open"
			}
			ss.recvErr <- status.Errorf(codes.InvalidArgument, "loaderd: %s on a stream; after its Open a client sends only Acks and Wants", what)
			return
		}
		seqs, waits := ack.GetSeqs(), ack.GetWaitNs()
		if len(waits) != 0 && len(waits) != len(seqs) {
			ss.recvErr <- status.Errorf(codes.InvalidArgument, "loaderd: ack of %d batches with %d wait_ns (want one per batch, or none)", len(seqs), len(waits))
			return
		}
		for i, seq := range seqs {
			taken, err := ss.ack(seq)
			if err != nil {
				ss.recvErr <- err
				return
			}
			if taken && waits != nil {
				ss.stat.clientWait(ss.m, waits[i], time.Now())
			}
		}
	}
}

// want passes wanted batch numbers to an on-demand loader, holding the
// client to its window: at most p.inFlight wanted and not yet sent (the
// sent ones the credit bounds), none wanted twice before its ack.
func (ss *session) want(nums []uint64) error {
	if !ss.p.cfg.OnDemand {
		return status.Error(codes.InvalidArgument, "loaderd: Want on a stream not opened on demand (Open.on_demand)")
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.unsent+len(nums) > ss.p.inFlight {
		return status.Errorf(codes.InvalidArgument, "loaderd: Want of %d batches with %d wanted and not yet sent: over the window of %d", len(nums), ss.unsent, ss.p.inFlight)
	}
	for _, k := range nums {
		if _, dup := ss.wanted[k]; dup {
			return status.Errorf(codes.InvalidArgument, "loaderd: batch %d wanted again before its ack", k)
		}
		if k > math.MaxInt64 {
			return status.Errorf(codes.InvalidArgument, "loaderd: batch number %d is past the stream's end", k)
		}
		if err := ss.l.Want(int64(k)); err != nil {
			return status.Errorf(codes.InvalidArgument, "%v", err)
		}
		ss.wanted[k] = struct{}{}
		ss.unsent++
	}
	return nil
}

// track puts a batch about to be sent into the window: before the send,
// since the client may ack it before Send returns. held batches stay valid
// for the client until their ack.
func (ss *session) track(seq uint64, b *loader.Batch, held bool) {
	e := unacked{seq: seq}
	if held {
		e.b = b
		ss.slots.retain()
	}
	ss.mu.Lock()
	if ss.wanted != nil {
		ss.unsent--
	}
	ss.window = append(ss.window, e)
	ss.stat.window.Inc() // under mu: end's reset comes after
	ss.mu.Unlock()
	ss.srv.metrics.inFlight.Inc()
}

// ack takes seq out of the window, in whatever order acks come; after
// the stream ended it takes nothing.
func (ss *session) ack(seq uint64) (taken bool, err error) {
	ss.mu.Lock()
	if ss.closed {
		ss.mu.Unlock()
		return false, nil
	}
	i := 0
	for i < len(ss.window) && ss.window[i].seq != seq {
		i++
	}
	if i == len(ss.window) {
		ss.mu.Unlock()
		return false, status.Errorf(codes.InvalidArgument, "loaderd: ack of batch %d, which is not awaiting one", seq)
	}
	b := ss.window[i].b
	delete(ss.wanted, seq)
	last := len(ss.window) - 1
	ss.window[i] = ss.window[last]
	ss.window = ss.window[:last]
	ss.stat.window.Dec()
	ss.mu.Unlock()
	if b != nil {
		b.Release()
		ss.slots.drop()
	}
	ss.srv.metrics.inFlight.Dec()
	ss.credit <- struct{}{}
	return true, nil
}

// run streams batches until the loader ends, the client goes, or the
// server stops.
func (ss *session) run(ctx context.Context) error {
	// The loader's Next waits for batches, on demand for wants too: once
	// receive stops (the client half-closed, or broke the protocol) no
	// more will come, so it ends that wait.
	nctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-ss.recvEnd:
			cancel()
		case <-ss.laneEnded():
			cancel()
		case <-nctx.Done():
		}
	}()
	if ss.lane != nil {
		if err := ss.awaitLane(ctx); err == errClientDone {
			return nil
		} else if err != nil {
			return err
		}
	}
	for {
		if err := ss.wait(ctx); err == errClientDone {
			return nil
		} else if err != nil {
			return err
		}
		t0 := time.Now()
		b, err := ss.l.Next(nctx)
		if err == io.EOF {
			ss.credit <- struct{}{} // the token taken for a batch that never came
			return ss.drain(ctx)
		}
		if err != nil && ctx.Err() == nil && nctx.Err() != nil {
			select {
			case <-ss.laneEnded():
				return ss.laneFailure()
			default:
			}
			err = <-ss.recvErr
			ss.recvErr <- err
			if err == io.EOF {
				return nil
			}
			return err
		}
		if err != nil {
			return ss.fail(ctx, err)
		}
		ss.m.wait.Observe(time.Since(t0).Seconds())
		ss.m.busy.Observe(b.Busy().Seconds())
		// A fresh message per send: gRPC may read a sent message lazily
		// (stats handlers), and b's slices are reused once it is released.
		msg := batchMessage(ss.p, b, ss.lane == nil) // a lane frame carries b's own
		next, n := ss.l.After(b), b.Len()
		ss.track(msg.Seq, b, ss.tr.heldUntilAck())
		// From here b belongs to the transport: gRPC or the client's ack.
		if err := ss.tr.send(msg, b); err != nil {
			return err
		}
		ss.sent++
		ss.next = next
		ss.m.images.Add(float64(n))
		ss.m.batches.Inc()
		ss.stat.images.Add(float64(n))
		ss.stat.sent.Add(int64(n))
	}
}

// batchMessage describes b; the transport adds the tensor. With ids it
// carries copies of b's indices and labels.
func batchMessage(p *plan, b *loader.Batch, ids bool) *pb.Batch {
	out := p.pipe.Out()
	sh := out.Shape()
	msg := &pb.Batch{Seq: uint64(b.Seq), Epoch: b.Epoch, BatchIndex: b.Index,
		Dtype: pb.DType(out.DType), Layout: pb.Layout(out.Layout),
		Shape: []int64{int64(b.Len()), int64(sh[0]), int64(sh[1]), int64(sh[2])}}
	if ids {
		msg.Indices, msg.Labels = append([]int64(nil), b.Indices...), append([]int32(nil), b.Labels...)
	}
	if b.Params != nil {
		msg.Params = paramsMessage(p.pipe, b.Params)
	}
	if p.pipe.Mixer() != nil { // every batch says how it was mixed
		m := b.Mix
		msg.Mix = &pb.MixRecord{Kind: pb.MixKind(m.Kind), Lam: m.Lambda,
			BoxTop: m.Box.Y, BoxLeft: m.Box.X, BoxHeight: m.Box.H, BoxWidth: m.Box.W}
	}
	fieldsMessage(msg, b)
	return msg
}

// photoParams adds the photometric ops' draws to pr, as loader.proto's
// AugmentParams lays them out.
func photoParams(pr *pb.AugmentParams, ps []sample.Params) {
	n := len(ps)
	pr.JitterOrder, pr.Jitter = make([]uint32, 0, 4*n), make([]float32, 0, 4*n)
	pr.Gray, pr.Sigma, pr.NumOps = make([]bool, n), make([]float32, n), make([]uint32, n)
	for i, x := range ps {
		ph := &x.Photo
		for k := range 4 {
			pr.JitterOrder = append(pr.JitterOrder, uint32(ph.JitterOrder[k]))
			pr.Jitter = append(pr.Jitter, ph.Jitter[k])
		}
		pr.Gray[i], pr.Sigma[i], pr.NumOps[i] = ph.Gray, ph.Sigma, uint32(ph.NumOps)
		for _, o := range ph.Ops[:min(int(ph.NumOps), len(ph.Ops))] {
			pr.Op = append(pr.Op, uint32(o.Op))
			pr.Magnitude = append(pr.Magnitude, o.Magnitude)
		}
	}
}

// eraseParams adds random_erasing's draws to pr.
func eraseParams(pr *pb.AugmentParams, ps []sample.Params) {
	n := len(ps)
	pr.Erased, pr.EraseNoise = make([]bool, n), make([]uint64, n)
	pr.EraseTop, pr.EraseLeft, pr.EraseHeight, pr.EraseWidth = make([]int32, n), make([]int32, n), make([]int32, n), make([]int32, n)
	for i, x := range ps {
		e := &x.Erase
		pr.Erased[i], pr.EraseNoise[i] = e.Applied, e.Noise
		pr.EraseTop[i], pr.EraseLeft[i], pr.EraseHeight[i], pr.EraseWidth[i] = e.Box.Y, e.Box.X, e.Box.H, e.Box.W
	}
}

// wait takes one unit of window credit, or reports why the stream must end.
// Time spent here is time the client's window was full.
func (ss *session) wait(ctx context.Context) error {
	select {
	case <-ss.credit:
		return nil
	default:
	}
	t0 := time.Now()
	defer func() { ss.stat.windowFull.Add(time.Since(t0).Seconds()) }()
	select {
	case <-ss.credit:
		return nil
	case err := <-ss.recvErr:
		ss.recvErr <- err // later waits see it too
		if err == io.EOF {
			return errClientDone
		}
		return err
	case <-ss.laneEnded():
		return ss.laneFailure()
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
	for range ss.p.inFlight {
		select {
		case <-ss.credit:
		case err := <-ss.recvErr:
			if err == io.EOF {
				return nil
			}
			return err
		case <-ss.laneEnded(): // every batch went out: a client that leaves now is done
			return ss.lane.broke()
		case <-ctx.Done():
			return ss.ctxErr(ctx)
		case <-timer.C:
			return status.Errorf(codes.DeadlineExceeded, "loaderd: stream finished but the client did not acknowledge its last batches within %v", ss.srv.opts.AckTimeout)
		}
	}
	return nil
}

// fail maps a loader error to its status: DATA_LOSS for a sample that
// cannot be read, INTERNAL for a source that broke its contract.
func (ss *session) fail(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ss.ctxErr(ctx)
	}
	var se *loader.SampleError
	if errors.As(err, &se) && !errors.Is(err, loader.ErrIndex) && !errors.Is(err, loader.ErrClosed) {
		ss.m.sampleErrors.Inc()
		ss.srv.log.Error("sample failed", "err", err)
		return status.Errorf(codes.DataLoss, "%v", err)
	}
	ss.srv.log.Error("stream failed", "err", err)
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
