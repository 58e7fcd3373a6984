package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loaderd/loaderd/client"
	"github.com/loaderd/loaderd/client/clienttest"
	"github.com/loaderd/loaderd/client/sample"
	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
	"github.com/loaderd/loaderd/sampler"
)

// startDaemon serves n synthetic images as "train" from a loaderd process.
func startDaemon(t testing.TB, n int64) *client.Client {
	t.Helper()
	d := clienttest.Start(t, "--dataset", fmt.Sprintf("train=synthetic:%d", n), "--workers", "2")
	return d.Dial(t)
}

// TestStream reads two epochs inline and over shared memory, with the
// augmentation parameters, and checks every batch, the counters and the
// position; both transports deliver the same bytes.
func TestStream(t *testing.T) {
	c := startDaemon(t, 100)
	var sums [2][]byte
	for i, shm := range []bool{false, true} {
		ctx := context.Background()
		s, err := c.Open(ctx, client.StreamConfig{Dataset: "train", BatchSize: 32, Seed: 5,
			SharedMemory: shm, IncludeParams: true, Prefetch: 3, Start: sampler.Position{Epoch: 1}, Epochs: 1})
		if err != nil {
			t.Fatal(err)
		}
		h := s.Header()
		if h.GetBatchesPerEpoch() != 4 || h.GetBatchSize() != 32 || h.GetMaxInFlight() != 3 {
			t.Fatalf("header %v", h)
		}
		var n int64
		for {
			b, err := s.Next(ctx)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			k := len(b.Indices)
			if b.Seq != uint64(n) || b.Epoch != 1 || b.Index != n || len(b.Labels) != k || len(b.Params) != k ||
				len(b.Data) != k*int(h.GetSampleBytes()) || b.DType != sample.DType(h.GetDtype()) ||
				b.Layout != sample.Layout(h.GetLayout()) || len(b.Shape) != 4 || b.Shape[0] != k {
				t.Fatalf("batch %d: seq %d epoch %d index %d, %d indices, %d labels, %d params, %d bytes, %v %v %v",
					n, b.Seq, b.Epoch, b.Index, k, len(b.Labels), len(b.Params), len(b.Data), b.DType, b.Layout, b.Shape)
			}
			sums[i] = append(sums[i], b.Data...)
			if err := b.Release(); err != nil {
				t.Fatal(err)
			}
			n++
		}
		st := s.Stats()
		if n != 4 || st.Batches != 4 || st.Images != 100 || st.Bytes != int64(len(sums[i])) || st.Elapsed <= 0 ||
			st.Reconnects != 0 || s.Position() != (sampler.Position{Epoch: 2}) {
			t.Errorf("shm %v: %d batches, stats %+v, position %v", shm, n, st, s.Position())
		}
		if st.WaitShare() < 0 || st.WaitShare() > 1 || st.ImagesPerSecond() <= 0 {
			t.Errorf("wait share %v, %v images/s", st.WaitShare(), st.ImagesPerSecond())
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(sums[0], sums[1]) {
		t.Error("inline and shared-memory batches differ")
	}
}

// TestConcurrentRelease releases batches from other goroutines while
// Next runs, and reads Stats, Position and Header meanwhile (run with
// -race).
func TestConcurrentRelease(t *testing.T) {
	c := startDaemon(t, 256)
	ctx := context.Background()
	s, err := c.Open(ctx, client.StreamConfig{Dataset: "train", BatchSize: 8, Epochs: 1, Prefetch: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	held := make(chan *client.Batch, 4)
	var wg sync.WaitGroup
	wg.Go(func() {
		for b := range held {
			_ = s.Stats()
			_ = s.Position()
			_ = s.Header().GetBatchesPerEpoch()
			if err := b.Release(); err != nil {
				t.Error(err)
			}
		}
	})
	n := 0
	for {
		b, err := s.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		held <- b
		n++
	}
	close(held)
	wg.Wait()
	if n != 32 {
		t.Errorf("%d batches, want 32", n)
	}
}

func TestReleaseTwice(t *testing.T) {
	c := startDaemon(t, 64)
	s, err := c.Open(context.Background(), client.StreamConfig{Dataset: "train", BatchSize: 8, Epochs: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b, err := s.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Release(); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(); err == nil || err.Error() != "client: batch released twice" {
		t.Fatalf("second Release: %v", err)
	}
}

func TestNextHonoursContext(t *testing.T) {
	c := startDaemon(t, 64)
	s, err := c.Open(context.Background(), client.StreamConfig{Dataset: "train", BatchSize: 8, Prefetch: 1})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The window is one batch, and it is held: nothing more arrives.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := s.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next: %v, want the deadline", err)
	}
	b.Release()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Next(context.Background()); err == nil || !strings.HasPrefix(err.Error(), "client: stream closed") {
		t.Fatalf("Next after Close: %v", err)
	}
}

func TestOpenErrors(t *testing.T) {
	c := startDaemon(t, 64)
	_, err := c.Open(context.Background(), client.StreamConfig{Dataset: "nope", BatchSize: 8})
	if err == nil || !strings.HasPrefix(err.Error(), `client: open "nope": `) || !strings.Contains(err.Error(), "NotFound") {
		t.Fatalf("Open of an unknown dataset: %v", err)
	}
	if _, err := client.Dial("127.0.0.1:1\x00"); err == nil || !strings.HasPrefix(err.Error(), "client: dial ") {
		t.Fatalf("Dial: %v", err)
	}
}

func TestConsumeProgress(t *testing.T) {
	c := startDaemon(t, 512)
	var out strings.Builder
	st, err := client.Consume(context.Background(), c, client.ConsumeConfig{
		Stream:   client.StreamConfig{Dataset: "train", BatchSize: 16, Epochs: 1},
		StepTime: time.Millisecond, Progress: &out, Interval: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	if st.Images != 512 || st.Batches != 32 {
		t.Errorf("stats %+v", st)
	}
	if !strings.Contains(out.String(), "epoch 0 batch 32/32") || !strings.HasSuffix(out.String(), "\n") {
		t.Errorf("progress %q", out.String())
	}
	if _, err := client.Consume(context.Background(), c, client.ConsumeConfig{Stream: client.StreamConfig{Dataset: "nope", BatchSize: 1}}); err == nil {
		t.Error("Consume of an unknown dataset succeeded")
	}
}

// fake is a daemon that answers the nth stream (from 0), opened with
// open, with the replies and the status script returns.
type fake struct {
	pb.UnimplementedLoaderServer
	mu     sync.Mutex
	calls  int
	script func(n int, open *pb.Open) ([]*pb.StreamReply, error)
}

func (f *fake) Stream(gs pb.Loader_StreamServer) error {
	req, err := gs.Recv()
	if err != nil {
		return err
	}
	f.mu.Lock()
	n := f.calls
	f.calls++
	f.mu.Unlock()
	replies, err := f.script(n, req.GetOpen())
	for _, r := range replies {
		if err := gs.Send(r); err != nil {
			return err
		}
	}
	return err
}

// startFake serves replies to every stream.
func startFake(t *testing.T, replies ...*pb.StreamReply) *client.Client {
	return startScript(t, func(int, *pb.Open) ([]*pb.StreamReply, error) { return replies, nil })
}

func startScript(t *testing.T, script func(n int, open *pb.Open) ([]*pb.StreamReply, error)) *client.Client {
	t.Helper()
	srv := grpc.NewServer()
	pb.RegisterLoaderServer(srv, &fake{script: script})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	c, err := client.Dial(lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestBadDaemon holds the client to what a daemon may send: a stream
// starts with a header, every later message is a batch with a tensor that
// fits, and a message of a kind the client does not know is skipped.
func TestBadDaemon(t *testing.T) {
	header := &pb.StreamReply{Msg: &pb.StreamReply_Header{Header: &pb.StreamHeader{
		BatchesPerEpoch: 10, BatchSize: 2, SampleBytes: 3, MaxInFlight: 2}}}
	batch := func(b *pb.Batch) *pb.StreamReply { return &pb.StreamReply{Msg: &pb.StreamReply_Batch{Batch: b}} }
	data := func(n int) *pb.Batch {
		return &pb.Batch{Indices: []int64{1, 2}, Tensor: &pb.Batch_Data{Data: bytes.Repeat([]byte{7}, n)}}
	}
	cases := []struct {
		name    string
		replies []*pb.StreamReply
		open    string // Open's error
		next    string // the first failing Next's error
		batches int    // received before it
	}{
		{"good", []*pb.StreamReply{header, batch(data(6)), batch(data(4))}, "", "", 2},
		{"unknown kind skipped", []*pb.StreamReply{header, {}, batch(data(6)), {}}, "", "", 1},
		{"nothing", nil, "daemon closed the stream before its header", "", 0},
		{"batch first", []*pb.StreamReply{batch(data(6))}, "batch before the stream header", "", 0},
		{"empty first", []*pb.StreamReply{{}}, "stream did not start with a header", "", 0},
		{"second header", []*pb.StreamReply{header, batch(data(6)), header}, "", "client: second stream header", 1},
		{"no tensor", []*pb.StreamReply{header, batch(&pb.Batch{Seq: 4})}, "", "client: batch 4 carries no tensor", 0},
		{"shm without a region", []*pb.StreamReply{header, batch(&pb.Batch{Tensor: &pb.Batch_Shm{Shm: &pb.ShmRef{Length: 1}}})},
			"", "client: batch 0 lies outside the shared region", 0},
		{"negative shm length", []*pb.StreamReply{header, batch(&pb.Batch{Tensor: &pb.Batch_Shm{Shm: &pb.ShmRef{Length: -1}}})},
			"", "outside the shared region", 0},
		{"tensor too large", []*pb.StreamReply{header, batch(data(7))}, "", "7 bytes, the buffer holds 6", 0},
		{"zero-length tensor", []*pb.StreamReply{header, batch(&pb.Batch{Tensor: &pb.Batch_Data{}})}, "", "", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := startFake(t, tc.replies...)
			ctx := context.Background()
			s, err := c.Open(ctx, client.StreamConfig{Dataset: "x", BatchSize: 2, Reconnects: -1})
			if tc.open != "" {
				if err == nil || !strings.Contains(err.Error(), tc.open) || !strings.HasPrefix(err.Error(), "client: ") {
					t.Fatalf("Open: %v, want %q", err, tc.open)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			n := 0
			for {
				b, err := s.Next(ctx)
				if err == io.EOF && tc.next == "" {
					break
				}
				if err != nil {
					if tc.next == "" || !strings.Contains(err.Error(), tc.next) {
						t.Fatalf("Next: %v, want %q", err, tc.next)
					}
					break
				}
				if b.Seq != uint64(n) || len(b.Indices) != 2 && len(b.Data) > 0 {
					t.Errorf("batch %d: seq %d, %d indices", n, b.Seq, len(b.Indices))
				}
				b.Release()
				n++
			}
			if n != tc.batches {
				t.Errorf("%d batches, want %d", n, tc.batches)
			}
		})
	}
}

// TestResume: a daemon that goes away (UNAVAILABLE) after every two
// batches; the stream reopens each time at the first batch it had not
// received, with the same request otherwise, until it runs out of
// reconnects, or the daemon changes the stream's shape.
func TestResume(t *testing.T) {
	header := func(batchSize int32) *pb.StreamReply {
		return &pb.StreamReply{Msg: &pb.StreamReply_Header{Header: &pb.StreamHeader{
			BatchesPerEpoch: 3, BatchSize: batchSize, SampleBytes: 1, MaxInFlight: 2}}}
	}
	batch := func(epoch, index int64) *pb.StreamReply {
		return &pb.StreamReply{Msg: &pb.StreamReply_Batch{Batch: &pb.Batch{Epoch: epoch, BatchIndex: index,
			Indices: []int64{index}, Tensor: &pb.Batch_Data{Data: []byte{byte(index), 0}}}}}
	}
	gone := status.Error(codes.Unavailable, "daemon stopping")
	for _, tc := range []struct {
		name       string
		reconnects int
		newSize    int32 // the batch size of the resumed streams
		want       string
		batches    int
	}{
		{"resumes", 5, 2, "", 6},
		{"gives up", 1, 2, "client: stream lost at epoch 1 batch 1 after 1 resumes", 4},
		{"shape changed", 5, 3, "the daemon changed the stream's shape on reconnect", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opens []*pb.Open
			var mu sync.Mutex
			c := startScript(t, func(n int, o *pb.Open) ([]*pb.StreamReply, error) {
				mu.Lock()
				opens = append(opens, o)
				mu.Unlock()
				size := int32(2)
				if n > 0 {
					size = tc.newSize
				}
				pos := sampler.Position{Epoch: o.GetStartEpoch(), Batch: o.GetStartBatch()}
				out := []*pb.StreamReply{header(size)}
				for range 2 {
					if pos.Epoch >= o.GetStartEpoch()+o.GetEpochs() {
						return out, nil
					}
					out = append(out, batch(pos.Epoch, pos.Batch))
					pos = pos.Next(3)
				}
				return out, gone
			})
			ctx := context.Background()
			s, err := c.Open(ctx, client.StreamConfig{Dataset: "x", BatchSize: 2, Epochs: 2, Seed: 4, Reconnects: tc.reconnects,
				ReconnectWait: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var got []sampler.Position
			for {
				b, err := s.Next(ctx)
				if err == io.EOF && tc.want == "" {
					break
				}
				if err != nil {
					if tc.want == "" || !strings.Contains(err.Error(), tc.want) {
						t.Fatalf("Next: %v, want %q", err, tc.want)
					}
					break
				}
				if b.Seq != uint64(len(got)) || b.Data[0] != byte(b.Index) {
					t.Errorf("batch %d: seq %d, data %v", len(got), b.Seq, b.Data)
				}
				got = append(got, sampler.Position{Epoch: b.Epoch, Batch: b.Index})
				b.Release()
			}
			if len(got) != tc.batches {
				t.Fatalf("received %v, want %d batches", got, tc.batches)
			}
			for i, p := range got {
				if want := (sampler.Position{Epoch: int64(i / 3), Batch: int64(i % 3)}); p != want {
					t.Fatalf("batch %d is %v, want %v", i, p, want)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for i, o := range opens[1:] {
				start := got[min(2*(i+1), len(got)-1)]
				if tc.want == "" && (o.GetStartEpoch() != start.Epoch || o.GetStartBatch() != start.Batch ||
					o.GetEpochs() != 2-start.Epoch || o.GetSeed() != 4 || o.GetBatchSize() != 2) {
					t.Errorf("open %d: %v, want a start at %v", i+1, o, start)
				}
			}
			if st := s.Stats(); tc.want == "" && st.Reconnects != 2 {
				t.Errorf("%d reconnects, want 2", st.Reconnects)
			}
		})
	}
}
