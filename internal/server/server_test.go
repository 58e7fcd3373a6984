package server

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client"
	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/loader/format/synthetic"
	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
	"github.com/loaderd/loaderd/sampler"
)

// startServer serves a synthetic dataset of n samples on a loopback port.
func startServer(t testing.TB, addr string, n int64) (*Server, string) {
	t.Helper()
	srv, err := New(Options{Workers: 2, Logger: slog.New(slog.DiscardHandler), AckTimeout: 5 * time.Second},
		&Dataset{Name: "synth", Spec: "synthetic", Source: synthetic.New(n, 0)})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	return srv, lis.Addr().String()
}

func dial(t testing.TB, addr string) *client.Client {
	t.Helper()
	c, err := client.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// received is one batch as the client saw it.
type received struct {
	epoch, index int64
	indices      []int64
	labels       []int32
	sum          [32]byte
}

func readAll(t testing.TB, c *client.Client, cfg client.StreamConfig) []received {
	t.Helper()
	s, err := c.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out []received
	for {
		b, err := s.Next(context.Background())
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, received{b.Epoch, b.Index, append([]int64(nil), b.Indices...), append([]int32(nil), b.Labels...), sha256.Sum256(b.Data)})
		if err := b.Release(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTwoRanksEndToEnd: ranks 0 and 1 of world 2 get disjoint, equal,
// complete epochs over real gRPC, identical across runs with one seed, and
// the same bytes over shared memory as inline.
func TestTwoRanksEndToEnd(t *testing.T) {
	_, addr := startServer(t, "127.0.0.1:0", 1000)
	c := dial(t, addr)
	run := func(shm bool) [2][]received {
		var out [2][]received
		done := make(chan int)
		for r := range 2 {
			go func() {
				out[r] = readAll(t, c, client.StreamConfig{Dataset: "synth", Rank: r, World: 2, BatchSize: 64, Seed: 7,
					Epochs: 2, SharedMemory: shm})
				done <- r
			}()
		}
		<-done
		<-done
		return out
	}
	first := run(false)
	for e := int64(0); e < 2; e++ {
		seen := map[int64]int{}
		var counts [2]int
		for r := range 2 {
			for _, b := range first[r] {
				if b.epoch == e {
					for _, i := range b.indices {
						seen[i]++
						counts[r]++
					}
				}
			}
		}
		if counts[0] != 500 || counts[1] != 500 || len(seen) != 1000 {
			t.Fatalf("epoch %d: ranks got %v samples covering %d of 1000", e, counts, len(seen))
		}
	}
	for name, again := range map[string][2][]received{"second run": run(false), "shared memory": run(true)} {
		if fmt.Sprint(again) != fmt.Sprint(first) {
			t.Fatalf("%s differs from the first run", name)
		}
	}
}

func TestBadOpen(t *testing.T) {
	_, addr := startServer(t, "127.0.0.1:0", 100)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	api := pb.NewLoaderClient(conn)
	tests := []struct {
		name string
		msg  *pb.StreamRequest
		code codes.Code
		want []string
	}{
		{"unknown dataset", open(&pb.Open{Dataset: "imagenet", BatchSize: 8}), codes.NotFound, []string{`"imagenet"`, "synth"}},
		{"rank >= world", open(&pb.Open{Dataset: "synth", BatchSize: 8, Rank: 2, World: 2}), codes.InvalidArgument, []string{"rank 2 of world 2"}},
		{"batch 0", open(&pb.Open{Dataset: "synth"}), codes.InvalidArgument, []string{"batch size 0"}},
		{"absurd batch", open(&pb.Open{Dataset: "synth", BatchSize: 1 << 30}), codes.InvalidArgument, []string{"batch size 1073741824"}},
		{"bad dtype", open(&pb.Open{Dataset: "synth", BatchSize: 8, Dtype: 99}), codes.InvalidArgument, []string{"dtype"}},
		{"bad augment", open(&pb.Open{Dataset: "synth", BatchSize: 8, Augment: "crop=64:0"}), codes.InvalidArgument, []string{"crop"}},
		{"every problem at once", open(&pb.Open{Dataset: "synth", Rank: 5, World: 2, MaxInFlight: 1000}), codes.InvalidArgument,
			[]string{"rank 5", "batch size 0", "max in flight 1000"}},
		{"start past the epoch", open(&pb.Open{Dataset: "synth", BatchSize: 10, StartBatch: 10}), codes.InvalidArgument, []string{"start batch 10"}},
		{"ack first", &pb.StreamRequest{Msg: &pb.StreamRequest_Ack{Ack: &pb.Ack{}}}, codes.InvalidArgument, []string{"must be Open"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := api.Stream(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			st.Send(tt.msg)
			_, err = st.Recv()
			if status.Code(err) != tt.code {
				t.Fatalf("got %v, want %v", err, tt.code)
			}
			for _, w := range tt.want {
				if !strings.Contains(status.Convert(err).Message(), w) {
					t.Errorf("message %q does not mention %q", status.Convert(err).Message(), w)
				}
			}
		})
	}
}

func open(o *pb.Open) *pb.StreamRequest {
	return &pb.StreamRequest{Msg: &pb.StreamRequest_Open{Open: o}}
}

// TestVanishingClients: 1,000 clients that open a stream, take a batch and
// vanish leave no stream, slot or goroutine behind.
func TestVanishingClients(t *testing.T) {
	srv, addr := startServer(t, "127.0.0.1:0", 10000)
	c := dial(t, addr)
	cycle := func(i int) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s, err := c.Open(ctx, client.StreamConfig{Dataset: "synth", BatchSize: 16, Seed: uint64(i), SharedMemory: i%2 == 1, Prefetch: 2})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Next(ctx); err != nil {
			t.Fatal(err)
		}
		s.Close() // without releasing the batch it holds
	}
	for i := range 20 {
		cycle(i)
	}
	waitFor(t, func() bool { return srv.ActiveStreams() == 0 })
	base := runtime.NumGoroutine()
	for i := range 1000 {
		cycle(i)
	}
	waitFor(t, func() bool { return srv.ActiveStreams() == 0 })
	waitFor(t, func() bool { return runtime.NumGoroutine() <= base+5 })
	// A pool returns once gRPC has freed the last inline tensor it held.
	waitFor(t, func() bool { return gauge(t, srv, "loaderd_slots_leased") == 0 })
	if g := gauge(t, srv, "loaderd_batches_in_flight"); g != 0 {
		t.Fatalf("%v batches still in flight", g)
	}
	for _, p := range srv.slots.idle {
		if n := p.p.Stats().SlotsInUse; n != 0 {
			t.Fatalf("an idle pool has %d slots in use", n)
		}
	}
}

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met after 10s (goroutines: %d)", runtime.NumGoroutine())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func gauge(t testing.TB, srv *Server, name string) float64 {
	mfs, err := srv.opts.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestResumeAfterRestart: a daemon that stops mid-stream and comes back
// on the same address; the client resumes and receives exactly the batches
// it had not yet received.
func TestResumeAfterRestart(t *testing.T) {
	cfg := client.StreamConfig{Dataset: "synth", BatchSize: 50, Seed: 3, Epochs: 3, Prefetch: 2}
	_, addr := startServer(t, "127.0.0.1:0", 1000)
	want := readAll(t, dial(t, addr), cfg)

	srv, addr := startServer(t, "127.0.0.1:0", 1000)
	c := dial(t, addr)
	s, err := c.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var got []received
	for {
		b, err := s.Next(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, received{b.Epoch, b.Index, append([]int64(nil), b.Indices...), append([]int32(nil), b.Labels...), sha256.Sum256(b.Data)})
		b.Release()
		if len(got) == 25 { // mid-epoch 1: restart the daemon
			srv.Shutdown(context.Background())
			srv, _ = startServer(t, addr, 1000)
		}
	}
	// A reconnect can land on the old daemon while it stops and be ended
	// at once; what matters is that one happened and nothing was lost.
	if st := s.Stats(); st.Reconnects < 1 {
		t.Fatalf("%d reconnects, want at least 1", st.Reconnects)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("resumed stream differs: %d batches, want %d", len(got), len(want))
	}
}

// TestHealthAndShutdown: SERVING while up, and an endless stream ends with
// UNAVAILABLE naming where to resume when the daemon stops.
func TestHealthAndShutdown(t *testing.T) {
	srv, addr := startServer(t, "127.0.0.1:0", 1000)
	conn, _ := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	resp, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: pb.Loader_ServiceDesc.ServiceName})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v, %v", resp, err)
	}
	st, _ := pb.NewLoaderClient(conn).Stream(context.Background())
	st.Send(open(&pb.Open{Dataset: "synth", BatchSize: 10}))
	if _, err := st.Recv(); err != nil { // header
		t.Fatal(err)
	}
	go srv.Shutdown(context.Background())
	for {
		_, err := st.Recv()
		if err != nil {
			if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "resume from epoch") {
				t.Fatalf("stream ended with %v, want UNAVAILABLE with a resume point", err)
			}
			break
		}
	}
}

// TestIncludeParams: per-sample parameters arrive and reproduce the batch.
func TestIncludeParams(t *testing.T) {
	_, addr := startServer(t, "127.0.0.1:0", 100)
	c := dial(t, addr)
	s, err := c.Open(context.Background(), client.StreamConfig{Dataset: "synth", BatchSize: 10, Seed: 9, Epochs: 1,
		IncludeParams: true, DType: sample.U8, Start: sampler.Position{Epoch: 0, Batch: 3}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	src := synthetic.New(100, 0)
	pipe, err := augment.NewPipeline(src.Spec(), augment.CIFARTrain(sample.U8, sample.CHW)...)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, pipe.Out().Bytes())
	scratch := make([]byte, 3072)
	n := 0
	for ; ; n++ {
		b, err := s.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if b.Index != int64(3+n) || len(b.Params) != 10 || b.DType != sample.U8 {
			t.Fatalf("batch %d: index %d, %d params, dtype %v", n, b.Index, len(b.Params), b.DType)
		}
		for k, idx := range b.Indices {
			_, pix, _ := src.Sample(idx, scratch)
			if b.Params[k] != pipe.Draw(9, 0, idx) {
				t.Fatalf("sample %d: params %v, want %v", idx, b.Params[k], pipe.Draw(9, 0, idx))
			}
			pipe.Apply(want, pix, b.Params[k])
			if string(want) != string(b.Data[k*len(want):(k+1)*len(want)]) {
				t.Fatalf("sample %d: pixels differ", idx)
			}
		}
		b.Release()
	}
	if n != 7 {
		t.Fatalf("%d batches from batch 3, want 7", n)
	}
}

// TestHalfCloseEndsStream: a client that closes its side asks the server
// to stop; the stream ends with OK and nothing stays in flight.
func TestHalfCloseEndsStream(t *testing.T) {
	srv, addr := startServer(t, "127.0.0.1:0", 1000)
	conn, _ := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer conn.Close()
	for _, tr := range []pb.Transport{pb.Transport_TRANSPORT_INLINE, pb.Transport_TRANSPORT_SHM} {
		st, err := pb.NewLoaderClient(conn).Stream(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		st.Send(open(&pb.Open{Dataset: "synth", BatchSize: 10, MaxInFlight: 2, Transport: tr}))
		for range 3 { // the header and a full window of batches, none acked
			if _, err := st.Recv(); err != nil {
				t.Fatal(err)
			}
		}
		st.CloseSend()
		for {
			_, err := st.Recv()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%v: stream ended with %v, want OK", tr, err)
			}
		}
		waitFor(t, func() bool { return srv.ActiveStreams() == 0 })
		if g := gauge(t, srv, "loaderd_batches_in_flight"); g != 0 {
			t.Fatalf("%v: %v batches still in flight", tr, g)
		}
	}
}
