package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/loaderd/loaderd/loader"
	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// A lane carries a shared-memory stream's batch references and acks over
// a plain Unix connection of the fd socket instead of gRPC messages (see
// ShmRegion.lane in loader.proto). A batch in shared memory is a few
// dozen bytes of reference; what a gRPC message costs around them (HTTP/2
// framing, flow control, and in the Python client a hop between threads
// per message and per ack) is most of a client's CPU per batch. The gRPC
// stream stays open beside the lane for the Open, the header and the
// status, and for cancellation.
//
// The session owns the lane. Its run goroutine alone writes frames; the
// lane's reader goroutine alone reads acks; the fd broker hands the
// connection over once (attach). end closes it, which stops the reader.
type lane struct {
	mu      sync.Mutex
	claimed bool // a client presented the token for the lane
	closed  bool // the session ended: a late attach closes its connection
	conn    *net.UnixConn

	ready chan struct{} // closed at attach
	ended chan struct{} // closed when the reader stops
	err   error         // why the reader stopped; read after ended

	frame []byte // the frame being written; run goroutine only
}

// Frame kinds and sizes (see loader.proto).
const (
	laneBatch      = 1
	laneEnd        = 2
	laneHeaderSize = 64
	laneAckSize    = 16
)

func newLane() *lane {
	return &lane{ready: make(chan struct{}), ended: make(chan struct{})}
}

// claim reserves the lane for the client that presented the token: one
// connection per stream, and none after the stream ended.
func (ln *lane) claim() error {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	switch {
	case ln.closed:
		return errors.New("loaderd: the stream has ended")
	case ln.claimed:
		return errors.New("loaderd: the stream's lane is already attached")
	}
	ln.claimed = true
	return nil
}

// attach gives the claimed lane its connection (the broker's, from now on
// the session's) and starts the ack reader.
func (ss *session) attachLane(c *net.UnixConn) {
	ln := ss.lane
	ln.mu.Lock()
	if ln.closed {
		ln.mu.Unlock()
		c.Close()
		return
	}
	ln.conn = c
	ln.mu.Unlock()
	c.SetDeadline(time.Time{})
	ss.proven() // the client answered, as a first Ack would say
	close(ln.ready)
	go ss.readLane(c)
}

// close ends the lane with the session: the client reads what was written,
// then EOF.
func (ln *lane) close() {
	ln.mu.Lock()
	ln.closed = true
	c := ln.conn
	ln.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// readLane takes the client's acks until the lane closes.
func (ss *session) readLane(c *net.UnixConn) {
	ln := ss.lane
	defer close(ln.ended)
	r := bufio.NewReaderSize(c, 64*laneAckSize)
	var rec [laneAckSize]byte
	for {
		if _, err := io.ReadFull(r, rec[:]); err != nil {
			ln.err = err
			return
		}
		seq, wait := binary.LittleEndian.Uint64(rec[:]), binary.LittleEndian.Uint64(rec[8:])
		taken, err := ss.ack(seq)
		if err != nil {
			ln.err = err
			c.Close() // a client that broke the protocol gets nothing more
			return
		}
		if taken {
			ss.stat.clientWait(ss.m, wait, time.Now())
		}
	}
}

// laneEnded is closed once the lane's reader stopped; nil (never ready)
// for a stream without a lane.
func (ss *session) laneEnded() <-chan struct{} {
	if ss.lane == nil {
		return nil
	}
	return ss.lane.ended
}

// broke is the protocol error that stopped the reader, or nil when the
// lane just closed; call it after ended.
func (ln *lane) broke() error {
	if _, ok := status.FromError(ln.err); ok && ln.err != nil {
		return ln.err
	}
	return nil
}

// laneFailure is the stream's status once the lane's reader stopped: the
// protocol error it found, else the client's leaving.
func (ss *session) laneFailure() error {
	if err := ss.lane.broke(); err != nil {
		return err
	}
	return status.Error(codes.Canceled, "loaderd: the client closed the stream's shared-memory lane")
}

// awaitLane waits for the client to attach the lane it asked for.
func (ss *session) awaitLane(ctx context.Context) error {
	t := time.NewTimer(ss.srv.opts.AckTimeout)
	defer t.Stop()
	select {
	case <-ss.lane.ready:
		return nil
	case err := <-ss.recvErr:
		ss.recvErr <- err
		if err == io.EOF {
			return errClientDone
		}
		return err
	case <-ctx.Done():
		return ss.ctxErr(ctx)
	case <-t.C:
		return status.Errorf(codes.DeadlineExceeded, "loaderd: the client asked for a shared-memory lane (Open.shm_lane) and did not attach it within %v", ss.srv.opts.AckTimeout)
	}
}

// laneTransport is shmTransport with the references sent over the lane.
type laneTransport struct{ shmTransport }

func (t laneTransport) describe(h *pb.StreamHeader) {
	t.shmTransport.describe(h)
	h.Shm.Lane = true
}

// send writes b's frame; msg (made without indices and labels, see
// batchMessage) gives what follows it.
func (t laneTransport) send(msg *pb.Batch, b *loader.Batch) error {
	ln := t.ss.lane
	n := b.Len()
	if len(b.Labels) != n {
		return status.Errorf(codes.Internal, "loaderd: batch %d has %d labels for %d samples", msg.Seq, len(b.Labels), n)
	}
	// What the frame does not carry goes as a Batch message after it.
	hdr := laneHeader{seq: msg.Seq, epoch: msg.Epoch, index: msg.BatchIndex, n: n,
		slot: uint32(b.Slot.Index()), gen: b.Slot.Gen(), offset: int64(b.Slot.Offset()), length: int64(len(b.Data))}
	msg.Seq, msg.Epoch, msg.BatchIndex = 0, 0, 0
	msg.Dtype, msg.Layout, msg.Shape = 0, 0, nil
	var extra []byte
	if proto.Size(msg) > 0 {
		var err error
		if extra, err = proto.Marshal(msg); err != nil {
			return status.Errorf(codes.Internal, "loaderd: batch %d: %v", hdr.seq, err)
		}
	}
	f := ln.frame[:0]
	f = hdr.append(f, laneBatch, len(extra))
	for _, x := range b.Indices {
		f = binary.LittleEndian.AppendUint64(f, uint64(x))
	}
	for _, x := range b.Labels {
		f = binary.LittleEndian.AppendUint32(f, uint32(x))
	}
	for len(f)%8 != 0 {
		f = append(f, 0)
	}
	f = append(f, extra...)
	ln.frame = f
	if _, err := ln.conn.Write(f); err != nil {
		// The client closed the lane, or the reader did on a protocol
		// error: the reader's end says which.
		ln.conn.Close()
		<-ln.ended
		return t.ss.laneFailure()
	}
	return nil
}

// finish writes the end frame: the stream is over and every batch acked.
// A lane never attached (the client half-closed first) has no one to tell.
func (ln *lane) finish() error {
	ln.mu.Lock()
	c := ln.conn
	ln.mu.Unlock()
	if c == nil {
		return nil
	}
	f := (&laneHeader{}).append(ln.frame[:0], laneEnd, 0)
	ln.frame = f
	if _, err := c.Write(f); err != nil {
		select {
		case <-ln.ended: // the client left after its last ack: nothing was lost
			return ln.broke()
		default:
		}
		return status.Errorf(codes.Unavailable, "loaderd: shared-memory lane: %v", err)
	}
	return nil
}

type laneHeader struct {
	seq          uint64
	epoch, index int64
	n            int
	slot         uint32
	gen          uint64
	offset       int64
	length       int64
}

func (h *laneHeader) append(f []byte, kind uint32, extra int) []byte {
	le := binary.LittleEndian
	f = le.AppendUint32(f, kind)
	f = le.AppendUint32(f, uint32(h.n))
	f = le.AppendUint64(f, h.seq)
	f = le.AppendUint64(f, uint64(h.epoch))
	f = le.AppendUint64(f, uint64(h.index))
	f = le.AppendUint32(f, h.slot)
	f = le.AppendUint32(f, uint32(extra))
	f = le.AppendUint64(f, h.gen)
	f = le.AppendUint64(f, uint64(h.offset))
	return le.AppendUint64(f, uint64(h.length))
}
