package server

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/loaderd/loaderd/client"
	"github.com/loaderd/loaderd/loader/format/synthetic"
	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// laneServer serves a synthetic dataset of n samples over TCP, with its
// hand-over socket (and so lanes) on a Unix socket; it returns the gRPC
// address and the hand-over socket's path.
func laneServer(t *testing.T, n int64, ackTimeout time.Duration) (*Server, string, string) {
	t.Helper()
	fdPath := filepath.Join(shortTemp(t), "s.fd")
	srv, err := New(Options{Workers: 2, Logger: slog.New(slog.DiscardHandler), AckTimeout: ackTimeout, FdSocket: fdPath},
		&Dataset{Name: "synth", Spec: "synthetic", Source: synthetic.New(n, 0)})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fdLis, err := net.Listen("unix", fdPath)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	go srv.ServeFds(fdLis)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	return srv, lis.Addr().String(), fdPath
}

// laneStream opens a raw shared-memory stream that asks for a lane and
// returns it with its header.
func laneStream(t *testing.T, ctx context.Context, addr string, o *pb.Open) (pb.Loader_StreamClient, *pb.StreamHeader) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	st, err := pb.NewLoaderClient(conn).Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(open(o)); err != nil {
		t.Fatal(err)
	}
	r, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	return st, r.GetHeader()
}

// testLane is a client's end of a lane, written from the protocol's text
// in loader.proto.
type testLane struct {
	c      *net.UnixConn
	region []byte
}

// attachLane runs the lane's exchange and maps the region it brings.
func attachLane(path string, tok []byte) (*testLane, error) {
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	if _, err := c.Write(append([]byte{0, byte(len(tok))}, tok...)); err != nil {
		c.Close()
		return nil, err
	}
	buf, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		c.Close()
		return nil, err
	}
	if buf[0] != 0 {
		msg, _ := io.ReadAll(c)
		c.Close()
		return nil, errors.New(string(msg))
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		c.Close()
		return nil, errors.New("no descriptor")
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		c.Close()
		return nil, errors.New("no descriptor")
	}
	defer unix.Close(fds[0])
	var st unix.Stat_t
	if err := unix.Fstat(fds[0], &st); err != nil {
		c.Close()
		return nil, err
	}
	region, err := unix.Mmap(fds[0], 0, int(st.Size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		c.Close()
		return nil, err
	}
	return &testLane{c: c, region: region}, nil
}

func (l *testLane) close() {
	l.c.Close()
	unix.Munmap(l.region)
}

// laneFrame is one frame as read.
type laneFrame struct {
	kind uint32
	b    received
	rest *pb.Batch
	seq  uint64
}

func (l *testLane) next() (laneFrame, error) {
	var h [laneHeaderSize]byte
	if _, err := io.ReadFull(l.c, h[:]); err != nil {
		return laneFrame{}, err
	}
	le := binary.LittleEndian
	f := laneFrame{kind: le.Uint32(h[0:]), seq: le.Uint64(h[8:])}
	n := int(le.Uint32(h[4:]))
	f.b.epoch, f.b.index = int64(le.Uint64(h[16:])), int64(le.Uint64(h[24:]))
	extra := int(le.Uint32(h[36:]))
	off, length := int64(le.Uint64(h[48:])), int64(le.Uint64(h[56:]))
	if f.kind != laneBatch {
		return f, nil
	}
	body := make([]byte, 8*n+(4*n+7)/8*8+extra)
	if _, err := io.ReadFull(l.c, body); err != nil {
		return f, err
	}
	for i := range n {
		f.b.indices = append(f.b.indices, int64(le.Uint64(body[8*i:])))
		f.b.labels = append(f.b.labels, int32(le.Uint32(body[8*n+4*i:])))
	}
	f.b.sum = sha256.Sum256(l.region[off : off+length])
	f.rest = &pb.Batch{}
	if extra > 0 {
		if err := proto.Unmarshal(body[len(body)-extra:], f.rest); err != nil {
			return f, err
		}
	}
	return f, nil
}

func (l *testLane) ack(seq uint64) error {
	var a [laneAckSize]byte
	binary.LittleEndian.PutUint64(a[:], seq)
	binary.LittleEndian.PutUint64(a[8:], 1000)
	_, err := l.c.Write(a[:])
	return err
}

// TestShmLane: batches taken over a lane are those of an inline stream,
// labels, indices, order and bytes; what the frame does not carry (here
// params) comes in its rest; the lane ends with its end frame, once every
// batch is acked, and the stream with OK.
func TestShmLane(t *testing.T) {
	_, addr, fdPath := laneServer(t, 1000, 5*time.Second)
	c := dial(t, addr)
	want := readAll(t, c, client.StreamConfig{Dataset: "synth", BatchSize: 64, Seed: 3, Epochs: 2})
	ctx, cancel := context.WithTimeout(context.Background(), testBound)
	defer cancel()
	st, h := laneStream(t, ctx, addr, &pb.Open{Dataset: "synth", BatchSize: 64, Seed: 3, Epochs: 2,
		Transport: pb.Transport_TRANSPORT_SHM, ShmLane: true, IncludeParams: true})
	if !h.GetShm().GetLane() {
		t.Fatal("the header does not grant the lane")
	}
	l, err := attachLane(fdPath, h.GetShm().GetToken())
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	var got []received
	for {
		f, err := l.next()
		if err != nil {
			t.Fatalf("after %d batches: %v", len(got), err)
		}
		if f.kind == laneEnd {
			break
		}
		if f.kind != laneBatch || f.seq != uint64(len(got)) {
			t.Fatalf("frame %d: kind %d seq %d", len(got), f.kind, f.seq)
		}
		if p := f.rest.GetParams(); len(p.GetTop()) != len(f.b.labels) || len(p.GetFlip()) != len(f.b.labels) {
			t.Fatalf("batch %d: params for %d of %d samples in the frame's rest", f.seq, len(p.GetTop()), len(f.b.labels))
		}
		got = append(got, f.b)
		if err := l.ack(f.seq); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Recv(); err != io.EOF {
		t.Fatalf("the stream ended with %v, want OK", err)
	}
	if len(got) != len(want) {
		t.Fatalf("lane gave %d batches, inline %d", len(got), len(want))
	}
	for i := range want {
		w, g := want[i], got[i]
		if g.epoch != w.epoch || g.index != w.index || g.sum != w.sum || !slices.Equal(g.indices, w.indices) || !slices.Equal(g.labels, w.labels) {
			t.Fatalf("batch %d differs: lane (%d,%d), inline (%d,%d)", i, g.epoch, g.index, w.epoch, w.index)
		}
	}
}

// TestShmLaneRefusals: a lane is one connection, for a stream that asked
// for it, and a client that breaks its protocol, closes it, or never
// attaches it ends the stream with a status that says so.
func TestShmLaneRefusals(t *testing.T) {
	_, addr, fdPath := laneServer(t, 100000, 300*time.Millisecond)
	shm := func(lane bool) *pb.Open {
		return &pb.Open{Dataset: "synth", BatchSize: 32, Transport: pb.Transport_TRANSPORT_SHM, ShmLane: lane}
	}
	ctx, cancel := context.WithTimeout(context.Background(), testBound)
	defer cancel()
	ends := func(st pb.Loader_StreamClient, code codes.Code, says string) {
		t.Helper()
		for {
			_, err := st.Recv()
			if err == nil {
				continue
			}
			if status.Code(err) != code || !strings.Contains(err.Error(), says) {
				t.Fatalf("stream ended with %v, want %v saying %q", err, code, says)
			}
			return
		}
	}

	t.Run("no lane asked", func(t *testing.T) {
		_, h := laneStream(t, ctx, addr, shm(false))
		if h.GetShm().GetLane() {
			t.Fatal("a lane granted that was not asked for")
		}
		if _, err := attachLane(fdPath, h.GetShm().GetToken()); err == nil || !strings.Contains(err.Error(), "no lane") {
			t.Fatalf("lane exchange on a stream without one: %v", err)
		}
	})
	t.Run("second attach", func(t *testing.T) {
		_, h := laneStream(t, ctx, addr, shm(true))
		l, err := attachLane(fdPath, h.GetShm().GetToken())
		if err != nil {
			t.Fatal(err)
		}
		defer l.close()
		if _, err := attachLane(fdPath, h.GetShm().GetToken()); err == nil || !strings.Contains(err.Error(), "already attached") {
			t.Fatalf("second lane: %v", err)
		}
	})
	t.Run("bad ack", func(t *testing.T) {
		st, h := laneStream(t, ctx, addr, shm(true))
		l, err := attachLane(fdPath, h.GetShm().GetToken())
		if err != nil {
			t.Fatal(err)
		}
		defer l.close()
		if err := l.ack(1 << 40); err != nil {
			t.Fatal(err)
		}
		ends(st, codes.InvalidArgument, "not awaiting")
	})
	t.Run("lane closed", func(t *testing.T) {
		st, h := laneStream(t, ctx, addr, shm(true))
		l, err := attachLane(fdPath, h.GetShm().GetToken())
		if err != nil {
			t.Fatal(err)
		}
		if f, err := l.next(); err != nil || f.kind != laneBatch {
			t.Fatalf("first frame: kind %d, %v", f.kind, err)
		}
		l.close()
		ends(st, codes.Canceled, "closed the stream's shared-memory lane")
	})
	t.Run("half-closed before attaching", func(t *testing.T) {
		st, _ := laneStream(t, ctx, addr, shm(true))
		if err := st.CloseSend(); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); err != io.EOF {
			t.Fatalf("stream ended with %v, want OK", err)
		}
	})
	t.Run("never attached", func(t *testing.T) {
		st, _ := laneStream(t, ctx, addr, shm(true))
		ends(st, codes.DeadlineExceeded, "did not attach")
	})
}

// TestShmLaneUnread: a client that attaches its lane and never reads it
// blocks the daemon's frame writes once the socket's buffer is full; the
// stream's cancellation still ends the stream, and frees what it held.
func TestShmLaneUnread(t *testing.T) {
	srv, addr, fdPath := laneServer(t, 100000, 5*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Frames of 4096 samples are 48 KiB: a window of 8 is more than a
	// Unix socket buffers (~200 KiB).
	_, h := laneStream(t, ctx, addr, &pb.Open{Dataset: "synth", BatchSize: 4096, MaxInFlight: 8,
		Transport: pb.Transport_TRANSPORT_SHM, ShmLane: true, Augment: "out=u8:hwc"})
	l, err := attachLane(fdPath, h.GetShm().GetToken())
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	waitFor(t, func() bool { return gauge(t, srv, "loaderd_batches_in_flight") >= 3 })
	time.Sleep(300 * time.Millisecond) // the daemon fills the socket and blocks
	cancel()
	waitFor(t, func() bool { return gauge(t, srv, "loaderd_streams") == 0 })
}
