package server

import (
	"context"
	"net"
	"runtime/debug"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// TestDeadConnectionReleasesBudget (issue 29, case 1): clients that open
// inline streams, read their first batch and die leave frames queued on
// their dead connections, which gRPC never frees. Their pools' memory must
// come back when the connection ends, not when a garbage collection runs
// (turned off here, as a quiet daemon's collector may not run for
// minutes), so that a normal Open fits at once.
func TestDeadConnectionReleasesBudget(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	const limit = 40 << 20
	srv, api, _ := serve(t, Options{MemoryLimit: limit, IdleTTL: time.Millisecond},
		testDataset("good", testSource{n: 1 << 16}))
	addr := srv.listenAddrForTest(t)
	// Each stream: 4096 f32 8×8×3 samples a batch (3 MiB), 4 in flight + spares.
	open := &pb.Open{Dataset: "good", BatchSize: 4096, MaxInFlight: 4, Augment: "out=f32:chw",
		Transport: pb.Transport_TRANSPORT_INLINE}
	for i := range 3 {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		st, err := openRaw(context.Background(), pb.NewLoaderClient(conn), open)
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		if _, err := st.Recv(); err != nil {
			t.Fatalf("client %d: first batch: %v", i, err)
		}
		conn.Close() // dies with batches queued on the connection
	}
	start := time.Now()
	waitFor(t, func() bool { return memGauge(t, srv, memStream) == 0 })
	t.Logf("stream memory back %v after the last client died", time.Since(start).Round(time.Millisecond))
	st, err := openRaw(context.Background(), api, open)
	if err != nil {
		t.Fatalf("a normal Open after the dead clients: %v", err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
}

// listenAddrForTest serves srv on one more loopback listener and returns
// its address, for clients with connections of their own.
func (s *Server) listenAddrForTest(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(lis)
	return lis.Addr().String()
}
