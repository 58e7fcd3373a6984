package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/loader"
	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// testSource is n tiny images; sample bad fails with badErr.
type testSource struct {
	n, bad int64
	badErr error
}

func (s testSource) Len() int64 { return s.n }
func (s testSource) Spec() augment.Spec {
	return augment.Spec{H: 8, W: 8, C: 3, DType: sample.U8, Layout: sample.HWC}
}
func (s testSource) Classes() []string { return []string{"even", "odd"} }
func (s testSource) String() string    { return "test:" }
func (s testSource) Close() error      { return nil }
func (s testSource) Sample(i int64, scratch []byte) (int32, []byte, error) {
	if i == s.bad && s.badErr != nil {
		return 0, nil, s.badErr
	}
	for k := range scratch {
		scratch[k] = byte(i)
	}
	return int32(i % 2), scratch, nil
}

// serve starts a server over datasets on loopback and returns a raw client.
func serve(t *testing.T, opts Options, datasets ...*Dataset) (*Server, pb.LoaderClient, *grpc.ClientConn) {
	t.Helper()
	opts.Logger = slog.New(slog.DiscardHandler)
	opts.Workers = 2
	srv, err := New(opts, datasets...)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return srv, pb.NewLoaderClient(conn), conn
}

func testDataset(name string, src testSource) *Dataset {
	return &Dataset{Name: name, Spec: "test:", Source: src, Augment: "out=u8:hwc"}
}

// openRaw opens a stream, reads its header and answers it.
func openRaw(ctx context.Context, api pb.LoaderClient, o *pb.Open) (pb.Loader_StreamClient, error) {
	st, err := openSilent(ctx, api, o)
	if err != nil {
		return nil, err
	}
	// Answer the header, as loaderd's clients do (see creditWindow).
	if err := ack(st); err != nil {
		return nil, err
	}
	return st, nil
}

// openSilent is openRaw without the answer to the header: an older client.
func openSilent(ctx context.Context, api pb.LoaderClient, o *pb.Open) (pb.Loader_StreamClient, error) {
	st, err := api.Stream(ctx)
	if err != nil {
		return nil, err
	}
	if err := st.Send(&pb.StreamRequest{Msg: &pb.StreamRequest_Open{Open: o}}); err != nil {
		return nil, err
	}
	r, err := st.Recv()
	if err != nil {
		return nil, err
	}
	if r.GetHeader() == nil {
		return nil, fmt.Errorf("first reply is not a header: %v", r)
	}
	return st, nil
}

func ack(st pb.Loader_StreamClient, seqs ...uint64) error {
	return st.Send(&pb.StreamRequest{Msg: &pb.StreamRequest_Ack{Ack: &pb.Ack{Seqs: seqs}}})
}

// drainRaw reads and acks every batch to the end of the stream.
func drainRaw(st pb.Loader_StreamClient) (int, error) {
	n := 0
	for {
		r, err := st.Recv()
		if err != nil {
			if err == io.EOF {
				return n, nil
			}
			return n, err
		}
		n++
		if err := ack(st, r.GetBatch().GetSeq()); err != nil {
			// The stream ended; Recv tells how.
			for err == nil || err == io.EOF {
				_, err = st.Recv()
			}
			return n, err
		}
	}
}

// TestStatusCodes provokes every status code loader.proto lists for each
// RPC, and fails if the proto lists a code no case provokes (or the
// reverse): the documented contract is the tested one.
func TestStatusCodes(t *testing.T) {
	ctx := context.Background()
	good := testDataset("good", testSource{n: 64})
	corrupt := testDataset("corrupt", testSource{n: 64, bad: 5,
		badErr: &loader.RecordError{File: "shard-0.tar", Record: 5, Err: loader.ErrCorrupt}})
	broken := testDataset("broken", testSource{n: 64, bad: 7, badErr: fmt.Errorf("test: sample 7: %w", loader.ErrIndex)})
	cases := map[string]map[codes.Code]func(t *testing.T) error{
		"ListDatasets": {
			codes.Unavailable: func(t *testing.T) error {
				srv, api, _ := serve(t, Options{}, testDataset("good", testSource{n: 64}))
				srv.Shutdown(ctx)
				_, err := api.ListDatasets(ctx, &pb.ListDatasetsRequest{})
				return err
			},
		},
		"SampleNames": {
			codes.InvalidArgument: func(t *testing.T) error {
				_, api, _ := serve(t, Options{}, good)
				_, err := api.SampleNames(ctx, &pb.SampleNamesRequest{Dataset: "good", Start: 0, Count: 10001})
				return err
			},
			codes.NotFound: func(t *testing.T) error {
				_, api, _ := serve(t, Options{}, good)
				_, err := api.SampleNames(ctx, &pb.SampleNamesRequest{Dataset: "imagenet", Count: 1})
				return err
			},
			codes.Unavailable: func(t *testing.T) error {
				srv, api, _ := serve(t, Options{}, testDataset("good", testSource{n: 64}))
				srv.Shutdown(ctx)
				_, err := api.SampleNames(ctx, &pb.SampleNamesRequest{Dataset: "good", Count: 1})
				return err
			},
		},
		"GetSamples": {
			codes.InvalidArgument: func(t *testing.T) error {
				_, api, _ := serve(t, Options{}, good)
				_, err := api.GetSamples(ctx, &pb.GetSamplesRequest{Dataset: "good", Indices: []int64{64}})
				return err
			},
			codes.NotFound: func(t *testing.T) error {
				_, api, _ := serve(t, Options{}, good)
				_, err := api.GetSamples(ctx, &pb.GetSamplesRequest{Dataset: "imagenet", Indices: []int64{0}})
				return err
			},
			codes.ResourceExhausted: func(t *testing.T) error {
				// Room for the workers' scratch (2 × 2 × 192 bytes) and little more.
				_, api, _ := serve(t, Options{MemoryLimit: 1024}, good)
				_, err := api.GetSamples(ctx, &pb.GetSamplesRequest{Dataset: "good", Indices: []int64{0, 1, 2, 3, 4, 5, 6, 7}})
				return err
			},
			codes.DataLoss: func(t *testing.T) error {
				_, api, _ := serve(t, Options{}, corrupt)
				_, err := api.GetSamples(ctx, &pb.GetSamplesRequest{Dataset: "corrupt", Indices: []int64{5}})
				if err != nil && !strings.Contains(err.Error(), "shard-0.tar") {
					t.Errorf("DATA_LOSS does not name the file: %v", err)
				}
				return err
			},
			codes.Internal: func(t *testing.T) error {
				_, api, _ := serve(t, Options{}, broken)
				_, err := api.GetSamples(ctx, &pb.GetSamplesRequest{Dataset: "broken", Indices: []int64{7}})
				return err
			},
			codes.Unavailable: func(t *testing.T) error {
				srv, api, _ := serve(t, Options{}, good)
				srv.Shutdown(ctx)
				_, err := api.GetSamples(ctx, &pb.GetSamplesRequest{Dataset: "good", Indices: []int64{0}})
				return err
			},
		},
		"Stream": {
			codes.InvalidArgument: func(t *testing.T) error {
				_, api, _ := serve(t, Options{}, good)
				_, err := openRaw(ctx, api, &pb.Open{Dataset: "good", BatchSize: 8, Rank: 3, World: 2})
				return err
			},
			codes.NotFound: func(t *testing.T) error {
				_, api, _ := serve(t, Options{}, good)
				_, err := openRaw(ctx, api, &pb.Open{Dataset: "imagenet", BatchSize: 8})
				return err
			},
			codes.ResourceExhausted: func(t *testing.T) error {
				_, api, _ := serve(t, Options{MaxStreams: 1}, good)
				if _, err := openRaw(ctx, api, &pb.Open{Dataset: "good", BatchSize: 8}); err != nil {
					return err
				}
				_, err := openRaw(ctx, api, &pb.Open{Dataset: "good", BatchSize: 8})
				return err
			},
			codes.DataLoss: func(t *testing.T) error {
				_, api, _ := serve(t, Options{}, corrupt)
				st, err := openRaw(ctx, api, &pb.Open{Dataset: "corrupt", BatchSize: 8, Epochs: 1})
				if err != nil {
					return err
				}
				_, err = drainRaw(st)
				if err != nil && !strings.Contains(err.Error(), "shard-0.tar") {
					t.Errorf("DATA_LOSS does not name the file: %v", err)
				}
				return err
			},
			codes.Internal: func(t *testing.T) error {
				_, api, _ := serve(t, Options{}, broken)
				st, err := openRaw(ctx, api, &pb.Open{Dataset: "broken", BatchSize: 8, Epochs: 1})
				if err != nil {
					return err
				}
				_, err = drainRaw(st)
				return err
			},
			codes.Unavailable: func(t *testing.T) error {
				srv, api, _ := serve(t, Options{}, good)
				st, err := openRaw(ctx, api, &pb.Open{Dataset: "good", BatchSize: 8, MaxInFlight: 1})
				if err != nil {
					return err
				}
				if _, err := st.Recv(); err != nil { // one batch, never acked: the stream waits
					return err
				}
				go srv.Shutdown(ctx)
				_, err = st.Recv()
				if err != nil && !strings.Contains(err.Error(), "resume from epoch 0 batch 1") {
					t.Errorf("UNAVAILABLE does not name the resume point: %v", err)
				}
				return err
			},
			codes.DeadlineExceeded: func(t *testing.T) error {
				_, api, _ := serve(t, Options{AckTimeout: 50 * time.Millisecond}, good)
				st, err := openRaw(ctx, api, &pb.Open{Dataset: "good", BatchSize: 64, Epochs: 1})
				if err != nil {
					return err
				}
				if _, err := st.Recv(); err != nil { // the only batch, never acked
					return err
				}
				_, err = st.Recv()
				return err
			},
			codes.Canceled: func(t *testing.T) error {
				_, api, _ := serve(t, Options{}, good)
				cctx, cancel := context.WithCancel(ctx)
				st, err := openRaw(cctx, api, &pb.Open{Dataset: "good", BatchSize: 8})
				if err != nil {
					cancel()
					return err
				}
				cancel()
				_, err = drainRaw(st)
				return err
			},
		},
	}
	documented := documentedCodes(t)
	for rpc, byCode := range cases {
		for code, provoke := range byCode {
			t.Run(rpc+"/"+code.String(), func(t *testing.T) {
				if err := provoke(t); status.Code(err) != code {
					t.Fatalf("got %v (%v), want %v", status.Code(err), err, code)
				}
			})
			if !documented[rpc][code] {
				t.Errorf("%s returns %v, which loader.proto does not list", rpc, code)
			}
		}
		for code := range documented[rpc] {
			if byCode[code] == nil {
				t.Errorf("loader.proto lists %v for %s, which no case provokes", code, rpc)
			}
		}
	}
	if len(documented) != len(cases) {
		t.Errorf("loader.proto documents codes for %d RPCs, the test covers %d", len(documented), len(cases))
	}
}

// documentedCodes reads the "Status codes:" block above each rpc in
// loader.proto.
func documentedCodes(t *testing.T) map[string]map[codes.Code]bool {
	src, err := os.ReadFile("../../proto/loaderd/v1/loader.proto")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]codes.Code{}
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		// codes.Code's String is CamelCase; the proto's are the canonical names.
		names[strings.ToUpper(regexp.MustCompile(`([a-z])([A-Z])`).ReplaceAllString(c.String(), "${1}_$2"))] = c
	}
	names["CANCELLED"] = codes.Canceled
	out := map[string]map[codes.Code]bool{}
	var block map[codes.Code]bool
	line := regexp.MustCompile(`^\s*//\s{3,}([A-Z_]+)\s`)
	for _, l := range strings.Split(string(src), "\n") {
		switch {
		case strings.Contains(l, "Status codes"):
			block = map[codes.Code]bool{}
		case block != nil && line.MatchString(l):
			name := line.FindStringSubmatch(l)[1]
			c, ok := names[name]
			if !ok {
				t.Fatalf("loader.proto lists an unknown status code %s", name)
			}
			block[c] = true
		case block != nil && strings.HasPrefix(strings.TrimSpace(l), "rpc "):
			rpc := strings.Fields(strings.TrimSpace(l))[1]
			out[rpc[:strings.Index(rpc, "(")]] = block
			block = nil
		}
	}
	return out
}

// TestAcksInAnyOrder: the proto allows acks in any order; a window of 2
// acked 1-then-0 streams on to the end, over both transports.
func TestAcksInAnyOrder(t *testing.T) {
	// silent: a client that does not answer the header (an older one)
	// still gets its window, after creditWindow.
	for _, silent := range []bool{false, true} {
		open := openRaw
		if silent {
			open = openSilent
		}
		for _, tr := range []pb.Transport{pb.Transport_TRANSPORT_INLINE, pb.Transport_TRANSPORT_SHM} {
			t.Run(fmt.Sprintf("%v/silent=%v", tr, silent), func(t *testing.T) {
				srv, api, _ := serve(t, Options{}, testDataset("good", testSource{n: 64}))
				st, err := open(context.Background(), api, &pb.Open{Dataset: "good", BatchSize: 4, Epochs: 2, MaxInFlight: 2, Transport: tr})
				if err != nil {
					t.Fatal(err)
				}
				var got []uint64
				for {
					a, err := st.Recv()
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Fatalf("after %d batches: %v", len(got), err)
					}
					b, err := st.Recv()
					if err != nil {
						t.Fatalf("after %d batches: %v", len(got)+1, err)
					}
					sa, sb := a.GetBatch().GetSeq(), b.GetBatch().GetSeq()
					got = append(got, sa, sb)
					if err := ack(st, sb); err != nil { // the later one first
						t.Fatal(err)
					}
					if err := ack(st, sa); err != nil {
						t.Fatal(err)
					}
				}
				if len(got) != 32 {
					t.Fatalf("got %d batches, want 32", len(got))
				}
				for i, s := range got {
					if s != uint64(i) {
						t.Fatalf("batch %d has seq %d", i, s)
					}
				}
				waitFor(t, func() bool { return gauge(t, srv, "loaderd_batches_in_flight") == 0 })
			})
		}
	}
}

// TestDeadConnectionReleasesPool: a client whose connection dies while the
// daemon has inline batches queued in gRPC (beyond the flow-control
// window) gives back its pinned pool: gRPC drops those frames without
// freeing them, and the slot's cleanup hands the pool back once they are
// garbage.
func TestDeadConnectionReleasesPool(t *testing.T) {
	srv, _, _ := serve(t, Options{}, testDataset("big", testSource{n: 4096}))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	var mu sync.Mutex
	var raw []net.Conn
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			mu.Lock()
			raw = append(raw, c)
			mu.Unlock()
			return c, err
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Batches of 1024 × 192 bytes, never read: more than the client's
	// 64 KiB default stream window, so the first waits inside gRPC and
	// gRPC's write quota blocks the next send.
	_, err = openRaw(context.Background(), pb.NewLoaderClient(conn),
		&pb.Open{Dataset: "big", BatchSize: 1024, MaxInFlight: 8, Transport: pb.Transport_TRANSPORT_INLINE})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return gauge(t, srv, "loaderd_batches_in_flight") >= 1 })
	time.Sleep(50 * time.Millisecond) // for gRPC to write what the window allows
	if g := gauge(t, srv, "loaderd_slots_leased"); g == 0 {
		t.Fatal("no slots leased while streaming")
	}
	mu.Lock()
	for _, c := range raw {
		c.Close() // the connection dies: no RST_STREAM, no cleanup by the client
	}
	mu.Unlock()
	waitFor(t, func() bool { return srv.ActiveStreams() == 0 })
	waitFor(t, func() bool {
		runtime.GC()
		return gauge(t, srv, "loaderd_slots_leased") == 0
	})
	if len(srv.slots.idle) != 1 {
		t.Fatalf("%d idle pools, want the stream's one back in the cache", len(srv.slots.idle))
	}
}
