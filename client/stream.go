package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/client/wire"
	"github.com/loaderd/loaderd/pinned"
	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
	"github.com/loaderd/loaderd/sampler"
)

// StreamConfig asks the daemon for one rank's batches.
type StreamConfig struct {
	Dataset       string
	Rank, World   int
	BatchSize     int
	Seed          uint64
	NoShuffle     bool
	DropLast      bool // sampler: drop the tail instead of padding
	DropLastBatch bool // drop each epoch's incomplete last batch
	// Start is the first batch; a Start.Offset resumes elastically (see
	// docs/RESUME.md and Stream.Global).
	Start         sampler.Position
	Epochs        int64        // epochs to receive, counting Start.Epoch; 0 is endless
	Augment       string       // augmentation spec; empty is the dataset's default
	DType         sample.DType // 0 keeps the spec's
	Layout        sample.Layout
	SharedMemory  bool // receive views of the daemon's shared memory (same host only)
	Prefetch      int  // batches received ahead of the caller (the ring); default DefaultPrefetch
	IncludeParams bool // receive each sample's crop and flip
	Name          string
	Reconnects    int           // times the stream may resume after the daemon goes away; default 5
	ReconnectWait time.Duration // how long one resume keeps trying to reach the daemon; default 10 s
	Pool          PoolConfig    // for a Client dialled to a pool of daemons
	// ValuesOnClient asks for uint8 pixels and the value table, a quarter
	// of f32's bytes across hosts: Batch.Values makes the spec's tensor,
	// bit for bit (see Stream.ValuesOnClient for daemons that predate it).
	ValuesOnClient bool
}

// DefaultPrefetch is the ring a stream keeps ahead of its caller, and its
// window of unacknowledged batches. On 2 cores shared with the daemon, 8
// batches of 256 took shared-memory delivery from 63% to 79% of the
// in-process rate (BenchmarkE2E): a deeper window rides over scheduling
// hiccups instead of stalling the workers.
const DefaultPrefetch = 8

// MaxBatchSize is the most samples a stream's batch may hold: the daemon
// refuses an Open that asks for more.
const MaxBatchSize = wire.MaxBatchSize

// Stream receives one rank's batches. See the package doc for concurrency.
type Stream struct {
	c        *Client
	cfg      StreamConfig
	header   *pb.StreamHeader
	endEpoch int64 // absolute; 0 is endless
	ctx      context.Context
	cancel   context.CancelFunc
	opened   time.Time

	ring    *pinned.Pool
	regions []*pinned.Region
	region  []byte // the receiver's current region
	shared  []byte // what Region returns (under mu)
	free    chan *Batch
	ready   chan *Batch
	done    chan struct{} // closed when the receiver stops
	err     error         // why it stopped, valid after done

	sendMu   sync.Mutex
	gs       pb.Loader_StreamClient
	gsCancel context.CancelFunc
	gen      int
	ack      *pb.StreamRequest
	ackSeqs  []uint64
	ackWaits []uint64

	dec   wire.Decoder
	seq   uint64
	next  sampler.Position // first batch not yet received
	mu    sync.Mutex
	stats Stats

	pool *poolState // set on a stream over a pool of daemons

	values atomic.Pointer[valueTable] // the header's, parsed (values.go)
}

// Open starts a stream and waits for its header. SharedMemory is refused
// (an error matching errors.ErrUnsupported) where pinned.SharedSupported is
// false: outside Linux.
//
// On a Client dialled to a pool, Open asks every daemon for the stream at
// once and fails, naming them, if those that answer serve different
// datasets (by Dataset.fingerprint) or shapes; it needs one daemon to
// answer. The stream then wants each batch by number of one daemon, more
// of the faster ones, a window (PoolConfig.Window) of each at most; puts
// them back in order; and acks each to the daemon that made it. A daemon
// that fails or stays silent (PoolConfig.FailoverAfter) is dropped and
// what it owed is asked of the others; it is tried again, and takes work
// when it answers. The caller receives the same batches, byte for byte,
// as from one daemon, none missing and none twice. With every daemon gone
// the stream waits for one to come back (PoolConfig.OnEvent is told), so
// callers that want to give up pass Next a context with a deadline.
func (c *Client) Open(ctx context.Context, cfg StreamConfig) (*Stream, error) {
	if cfg.SharedMemory && !pinned.SharedSupported {
		return nil, fmt.Errorf("client: shared memory not supported on %s (use the inline transport): %w", runtime.GOOS, errors.ErrUnsupported)
	}
	if cfg.Prefetch == 0 {
		cfg.Prefetch = DefaultPrefetch
	}
	if cfg.World == 0 {
		cfg.World = 1
	}
	if c.pool != nil {
		return c.openPool(ctx, cfg)
	}
	if cfg.Reconnects == 0 {
		cfg.Reconnects = 5
	}
	if cfg.ReconnectWait == 0 {
		cfg.ReconnectWait = 10 * time.Second
	}
	if cfg.World == 0 {
		cfg.World = 1
	}
	s := &Stream{c: c, cfg: cfg, next: cfg.Start, opened: time.Now(), done: make(chan struct{})}
	if cfg.Epochs > 0 {
		s.endEpoch = cfg.Start.Epoch + cfg.Epochs
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.ack = &pb.StreamRequest{Msg: &pb.StreamRequest_Ack{Ack: &pb.Ack{}}}
	if err := s.connect(ctx, false); err != nil {
		s.cancel()
		return nil, err
	}
	h := s.header
	size := int(h.GetBatchSize()) * int(h.GetSampleBytes())
	window := int(h.GetMaxInFlight())
	s.free, s.ready = make(chan *Batch, window), make(chan *Batch, window)
	if !cfg.SharedMemory {
		ring, err := pinned.New(pinned.Config{SlotSize: size, Slots: window, Name: "client-ring"})
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("client: ring: %w", err)
		}
		s.ring = ring
	}
	for range window {
		b := &Batch{s: s}
		b.w.Indices, b.w.Labels = make([]int64, 0, h.GetBatchSize()), make([]int32, 0, h.GetBatchSize())
		if s.ring != nil {
			slot, _ := s.ring.TryLease()
			b.buf = slot.Bytes()[:size]
		}
		s.free <- b
	}
	go s.receive()
	return s, nil
}

// Header returns the daemon's description of the stream (after a resume,
// the new daemon's). The caller must not modify it.
func (s *Stream) Header() *pb.StreamHeader {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.header
}

// open builds the Open message for a start position.
func (s *Stream) open(start sampler.Position) *pb.Open {
	c := s.cfg
	o := &pb.Open{Dataset: c.Dataset, Rank: int32(c.Rank), World: int32(c.World), BatchSize: int32(c.BatchSize),
		Seed: c.Seed, NoShuffle: c.NoShuffle, DropLast: c.DropLast, DropLastBatch: c.DropLastBatch,
		StartEpoch: start.Epoch, StartBatch: start.Batch, StartOffset: start.Offset, Augment: c.Augment,
		Dtype: pb.DType(c.DType), Layout: pb.Layout(c.Layout), MaxInFlight: uint32(c.Prefetch),
		IncludeParams: c.IncludeParams, ClientName: c.Name, Transport: pb.Transport_TRANSPORT_INLINE,
		ValuesOnClient: c.ValuesOnClient}
	if c.SharedMemory {
		o.Transport = pb.Transport_TRANSPORT_SHM
	}
	if s.endEpoch > 0 {
		o.Epochs = s.endEpoch - start.Epoch
	}
	return o
}

// connect opens a server stream at s.next and reads its header. On a
// reconnect it waits for the daemon to come back, up to ReconnectWait.
func (s *Stream) connect(ctx context.Context, resume bool) error {
	gctx, gcancel := context.WithCancel(s.ctx)
	stop := context.AfterFunc(ctx, gcancel)
	defer stop()
	var timer *time.Timer
	if resume {
		timer = time.AfterFunc(s.cfg.ReconnectWait, gcancel)
	}
	gs, err := s.c.api.Stream(gctx, grpc.ForceCodecV2(wire.ClientCodec{}), grpc.WaitForReady(resume))
	if err == nil {
		err = gs.Send(&pb.StreamRequest{Msg: &pb.StreamRequest_Open{Open: s.open(s.next)}})
	}
	var r wire.Decoder // no Batch: a batch before the header fails
	// Send's io.EOF is the daemon ending the stream: RecvMsg says why.
	if err == nil || err == io.EOF {
		err = gs.RecvMsg(&r)
		if err == nil && r.Header == nil {
			err = errors.New("client: stream did not start with a header")
		}
	}
	if timer != nil {
		timer.Stop()
	}
	if err != nil {
		gcancel()
		if err == io.EOF {
			err = errors.New("client: daemon closed the stream before its header")
		}
		return fmt.Errorf("client: open %q: %w", s.cfg.Dataset, err)
	}
	if err := checkStart(r.Header, s.next); err != nil {
		gcancel()
		return err
	}
	if err := checkValues(r.Header, s.cfg.ValuesOnClient); err != nil {
		gcancel()
		return err
	}
	if old := s.header; old != nil && (old.GetSampleBytes() != r.Header.GetSampleBytes() || old.GetBatchSize() != r.Header.GetBatchSize() ||
		old.GetMaxInFlight() != r.Header.GetMaxInFlight() || !bytes.Equal(old.GetValueTable(), r.Header.GetValueTable())) {
		gcancel()
		return errors.New("client: the daemon changed the stream's shape on reconnect")
	}
	if shm := r.Header.GetShm(); shm != nil {
		region, err := mapRegion(s.c.sock, shm)
		if err != nil {
			gcancel()
			return err
		}
		s.regions = append(s.regions, region)
		s.region = region.Bytes()
	}
	// An empty Ack at once answers the header: the daemon plans one
	// batch of a new stream until its client answers (a flood's streams
	// never do), and this client may hold a batch or two before its
	// first real Ack.
	if err := gs.Send(&pb.StreamRequest{Msg: &pb.StreamRequest_Ack{Ack: &pb.Ack{}}}); err != nil && err != io.EOF {
		gcancel()
		return err
	}
	s.sendMu.Lock()
	if s.gsCancel != nil {
		s.gsCancel()
	}
	s.gs, s.gsCancel = gs, gcancel
	s.gen++
	s.sendMu.Unlock()
	s.mu.Lock()
	s.header = r.Header // read without the lock only by the receiver, its writer
	s.shared = s.region
	s.mu.Unlock()
	return nil
}

// Next returns the next batch, waiting for it if the ring is empty. It
// returns io.EOF after the last epoch. How long it blocked goes to the
// daemon on the batch's ack (Ack.wait_ns), which tunes --workers auto.
func (s *Stream) Next(ctx context.Context) (*Batch, error) {
	t0 := time.Now()
	var b *Batch
	var ok bool
	select {
	case b, ok = <-s.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	wait := time.Since(t0)
	s.mu.Lock()
	s.stats.Wait += wait
	s.mu.Unlock()
	if !ok {
		<-s.done
		return nil, s.err
	}
	if err := s.ctx.Err(); err != nil {
		// Closed: b's memory is gone, though it was still in the ring.
		return nil, fmt.Errorf("client: stream closed: %w", err)
	}
	b.wait = wait
	if s.pool != nil {
		s.pool.lastWait.Store(int64(wait))
	}
	return b, nil
}

func (s *Stream) release(b *Batch) error {
	s.sendMu.Lock()
	if !b.held {
		s.sendMu.Unlock()
		return errors.New("client: batch released twice")
	}
	b.held = false
	var err error
	if s.pool != nil { // acked on arrival
		s.sendMu.Unlock()
		s.free <- b
		return nil
	}
	if b.gen == s.gen {
		a := s.ack.GetAck()
		s.ackSeqs = append(s.ackSeqs[:0], b.serverSeq)
		s.ackWaits = append(s.ackWaits[:0], uint64(b.wait)) // the daemon's client-wait histogram, and --workers auto
		a.Seqs, a.WaitNs = s.ackSeqs, s.ackWaits
		err = s.gs.Send(s.ack)
	}
	s.sendMu.Unlock()
	s.free <- b
	if err == io.EOF {
		err = nil // the stream ended; the receiver reports why
	}
	return err
}

// Position returns the first batch not yet received: where a new stream
// would resume.
func (s *Stream) Position() sampler.Position {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next
}

// Stats returns the stream's counters.
func (s *Stream) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Elapsed = time.Since(s.opened)
	return st
}

// Close ends the stream and frees its buffers; held batches become invalid.
func (s *Stream) Close() error {
	s.cancel()
	s.sendMu.Lock()
	if s.gsCancel != nil {
		s.gsCancel()
	}
	s.sendMu.Unlock()
	if s.ready != nil {
		<-s.done
	}
	if p := s.pool; p != nil {
		// The scheduler has stopped: its daemons' streams and connections
		// end here, and then their receivers let go of the ring's buffers.
		for _, m := range p.members {
			if m.up {
				m.cancel()
				m.conn.Close()
			}
		}
		p.recv.Wait()
	}
	var errs []error
	for _, r := range s.regions {
		errs = append(errs, r.Close())
	}
	if s.ring != nil {
		errs = append(errs, s.ring.CloseForce())
	}
	return errors.Join(errs...)
}
