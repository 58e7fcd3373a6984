package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/loaderd/loaderd/client/wire"
	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// member is one daemon of a pool stream. The scheduler owns every field
// but those under sendMu, which Release reads too.
type member struct {
	addr     string
	conn     *grpc.ClientConn
	up       bool
	dialling bool
	removed  bool // gone from DNS: no new work, no reconnect
	retryAt  time.Time
	backoff  time.Duration
	wanted   []int64     // numbers wanted of it and not yet received, in order
	bufs     chan *Batch // buffers for its receiver, one per wanted number
	cancel   context.CancelFunc
	busy     time.Time     // since when it owes a batch without having sent one
	asked    time.Time     // when a batch was last wanted of it
	svc      time.Duration // recent time per batch, 0 until measured
	made     int64
	connects int
	lastErr  error

	sendMu sync.Mutex
	gs     pb.Loader_StreamClient // nil while down
	gen    int                    // counts its streams; a batch acks only to the stream it came on
}

// send writes one message on the member's stream, if it is still gen.
func (m *member) send(gen int, req *pb.StreamRequest) error {
	m.sendMu.Lock()
	defer m.sendMu.Unlock()
	if m.gs == nil || m.gen != gen {
		return nil // that stream is gone, and with it what it held
	}
	return m.gs.Send(req)
}

// poolArrival is a receiver's report: a batch, or why it stopped (with
// the buffer it held).
type poolArrival struct {
	m   *member
	gen int
	b   *Batch
	err error
}

// poolOpened is a connect attempt's result.
type poolOpened struct {
	m      *member
	conn   *grpc.ClientConn
	gs     pb.Loader_StreamClient
	ctx    context.Context // the stream's; cancel ends it
	cancel context.CancelFunc
	h      *pb.StreamHeader
	err    error
}

// dialMember opens an on-demand stream on the member's daemon and reads
// its header, within the pool's connect timeout. A fresh connection each
// time: one to a partitioned or hung daemon may look open for minutes.
func (s *Stream) dialMember(addr string) poolOpened {
	r := poolOpened{}
	conn, err := grpc.NewClient(memberTarget(addr), s.c.dialOpts...)
	if err != nil {
		r.err = err
		return r
	}
	ctx, cancel := context.WithCancel(s.ctx)
	timer := time.AfterFunc(s.cfg.Pool.ConnectTimeout, cancel)
	o := s.open(s.cfg.Start)
	o.OnDemand, o.MaxInFlight, o.Transport = true, uint32(s.cfg.Pool.Window), pb.Transport_TRANSPORT_INLINE
	gs, err := pb.NewLoaderClient(conn).Stream(ctx, grpc.ForceCodecV2(wire.ClientCodec{}))
	if err == nil {
		err = gs.Send(&pb.StreamRequest{Msg: &pb.StreamRequest_Open{Open: o}})
	}
	var d wire.Decoder
	if err == nil {
		err = gs.RecvMsg(&d)
	}
	stopped := timer.Stop()
	switch {
	case err == io.EOF:
		err = errors.New("the daemon closed the stream before its header")
	case err != nil && !stopped:
		err = fmt.Errorf("no header within %v: %w", s.cfg.Pool.ConnectTimeout, err)
	case err == nil && d.Header == nil:
		err = errors.New("the stream did not start with a header")
	case err == nil && !d.Header.GetOnDemand():
		err = errors.New("the daemon predates on-demand streams: it cannot serve in a pool")
	case err == nil:
		err = checkValues(d.Header, o.GetValuesOnClient())
	}
	if err != nil {
		cancel()
		conn.Close()
		r.err = err
		return r
	}
	return poolOpened{conn: conn, gs: gs, ctx: ctx, cancel: cancel, h: d.Header}
}

// receiveMember reads one member stream's batches into the buffers the
// scheduler hands it, and reports each, and finally why it stopped.
func (s *Stream) receiveMember(ctx context.Context, m *member, gen int, gs pb.Loader_StreamClient, bufs chan *Batch) {
	var dec wire.Decoder
	for {
		var b *Batch
		select {
		case b = <-bufs:
		case <-ctx.Done():
			s.arrive(poolArrival{m: m, gen: gen, err: ctx.Err()})
			return
		}
		err := s.recvInto(gs, &dec, b)
		s.arrive(poolArrival{m: m, gen: gen, b: b, err: err})
		if err != nil {
			return
		}
	}
}

// watchMember reports a member's connection lost (the daemon killed, or
// restarted) even while the member owes nothing, when no receive would
// notice: so that the pool knows who is up, and says when none is.
func (s *Stream) watchMember(ctx context.Context, m *member, gen int, conn *grpc.ClientConn) {
	for st := conn.GetState(); ; st = conn.GetState() {
		switch st {
		case connectivity.Idle, connectivity.TransientFailure, connectivity.Shutdown:
			s.arrive(poolArrival{m: m, gen: gen, err: fmt.Errorf("connection lost (%v)", st)})
			return
		}
		if !conn.WaitForStateChange(ctx, st) {
			return
		}
	}
}

func (s *Stream) arrive(a poolArrival) {
	select {
	case s.pool.arrivals <- a:
	case <-s.ctx.Done():
		if a.b != nil {
			s.free <- a.b // Close waits for the ring; never block it
		}
	}
}

// recvInto receives the next batch of gs into b and fills b's fields.
func (s *Stream) recvInto(gs pb.Loader_StreamClient, dec *wire.Decoder, b *Batch) error {
	dec.Batch, dec.Dst = &b.w, b.buf
	for {
		if err := gs.RecvMsg(dec); err != nil {
			return err
		}
		switch {
		case dec.Header != nil:
			return errors.New("client: second stream header")
		case dec.HasBatch:
			if dec.Batch.HasShm || dec.Batch.Data == nil {
				return fmt.Errorf("client: batch %d carries no inline tensor", dec.Batch.Seq)
			}
			b.Data = b.w.Data
			b.fill()
			return nil
		}
	}
}

// sameStream says why header h of a daemon does not match the pool's
// reference header ref, or nil: a pool's daemons must make the same
// batches from the same bytes.
func sameStream(ref, h *pb.StreamHeader) error {
	if h.GetFingerprint() == "" {
		return errNoFingerprint
	}
	if h.GetFingerprint() != ref.GetFingerprint() {
		return fmt.Errorf("it serves other bytes (dataset fingerprint %s, the pool's %s)", h.GetFingerprint(), ref.GetFingerprint())
	}
	type shape struct {
		size, perEpoch, samples, sampleBytes int64
		batch                                int32
		dtype                                pb.DType
		layout                               pb.Layout
		augment                              string
		valueDType                           pb.DType
		valueTable                           string
	}
	of := func(h *pb.StreamHeader) shape {
		return shape{h.GetDatasetSize(), h.GetBatchesPerEpoch(), h.GetSamplesPerEpoch(), h.GetSampleBytes(), h.GetBatchSize(), h.GetDtype(), h.GetLayout(), h.GetAugment(),
			h.GetValueDtype(), tableID(h.GetValueTable())}
	}
	if a, b := of(h), of(ref); a != b {
		return fmt.Errorf("its stream differs from the pool's: %+v, the pool's %+v", a, b)
	}
	if h.GetStartEpoch() != ref.GetStartEpoch() || h.GetStartBatch() != ref.GetStartBatch() || h.GetStartOffset() != ref.GetStartOffset() {
		return errors.New("it starts the stream elsewhere than the pool")
	}
	return nil
}
