//go:build !linux

package server

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/loaderd/loaderd/client"
	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// TestShmUnsupported: outside Linux (no memfd) a shared-memory Open is
// refused as Unimplemented, naming the platform and the way out, and the
// client refuses SharedMemory before asking; inline streams still work.
func TestShmUnsupported(t *testing.T) {
	_, addr := startServer(t, "127.0.0.1:0", 100)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	st, err := pb.NewLoaderClient(conn).Stream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	st.Send(open(&pb.Open{Dataset: "synth", BatchSize: 8, Transport: pb.Transport_TRANSPORT_SHM}))
	_, err = st.Recv()
	if msg := status.Convert(err).Message(); status.Code(err) != codes.Unimplemented ||
		!strings.Contains(msg, "not supported on "+runtime.GOOS) || !strings.Contains(msg, "inline") {
		t.Fatalf("shared-memory Open: %v, want Unimplemented naming %s and the inline transport", err, runtime.GOOS)
	}

	c := dial(t, addr)
	if _, err := c.Open(context.Background(), client.StreamConfig{Dataset: "synth", BatchSize: 8, SharedMemory: true}); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("client Open with SharedMemory: %v, want errors.ErrUnsupported", err)
	}
	if got := readAll(t, c, client.StreamConfig{Dataset: "synth", BatchSize: 10, Epochs: 1}); len(got) != 10 {
		t.Fatalf("inline stream: %d batches, want 10", len(got))
	}
}
