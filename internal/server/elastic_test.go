package server

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
	"github.com/loaderd/loaderd/sampler"
)

// TestStartOffset: Open.start_offset is checked against the dataset's
// size, reaches the loader and is echoed in the header; the first batch
// is the rest's first, and an offset at N starts the next epoch.
func TestStartOffset(t *testing.T) {
	_, addr := startServer(t, "127.0.0.1:0", 100)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	api := pb.NewLoaderClient(conn)
	first := func(o *pb.Open) (*pb.StreamHeader, *pb.Batch, error) {
		st, err := api.Stream(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer st.CloseSend()
		st.Send(open(o))
		h, err := st.Recv()
		if err != nil {
			return nil, nil, err
		}
		b, err := st.Recv()
		if err != nil {
			return nil, nil, err
		}
		return h.GetHeader(), b.GetBatch(), nil
	}
	for _, off := range []int64{-1, 101} {
		_, _, err := first(&pb.Open{Dataset: "synth", BatchSize: 8, StartOffset: off})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "start offset") {
			t.Errorf("start offset %d: %v", off, err)
		}
	}
	// World 3, rank 2, batch 4 from offset 40: rank 2's first index is
	// entry 42 of epoch 1's order.
	h, b, err := first(&pb.Open{Dataset: "synth", BatchSize: 4, Rank: 2, World: 3, Seed: 6, StartEpoch: 1, StartOffset: 40})
	if err != nil {
		t.Fatal(err)
	}
	order := sampler.NewPerm(100, sampler.EpochKey(6, 1))
	if h.GetStartOffset() != 40 || b.GetEpoch() != 1 || b.GetBatchIndex() != 0 || b.GetIndices()[0] != order.At(42) || b.GetIndices()[1] != order.At(45) {
		t.Errorf("header offset %d, batch %d/%d indices %v; want %d, %d", h.GetStartOffset(), b.GetEpoch(), b.GetBatchIndex(),
			b.GetIndices(), order.At(42), order.At(45))
	}
	_, b, err = first(&pb.Open{Dataset: "synth", BatchSize: 4, World: 3, StartEpoch: 1, StartOffset: 100})
	if err != nil || b.GetEpoch() != 2 || b.GetBatchIndex() != 0 {
		t.Errorf("offset N: batch %d/%d, %v", b.GetEpoch(), b.GetBatchIndex(), err)
	}
}
