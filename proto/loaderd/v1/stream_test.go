package loaderdv1_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// fakeLoader follows the Stream protocol in loader.proto: header first, then
// batches, never more than the window unacked, OK once all are acked.
type fakeLoader struct {
	pb.UnimplementedLoaderServer
	batches     int
	batchSize   int
	maxObserved int // most unacked batches seen
}

func (f *fakeLoader) Stream(s pb.Loader_StreamServer) error {
	req, err := s.Recv()
	if err != nil {
		return err
	}
	open := req.GetOpen()
	if open == nil {
		return status.Error(codes.InvalidArgument, "fake: first message must be Open")
	}
	window := int(open.GetMaxInFlight())
	hdr := &pb.StreamHeader{
		BatchSize: open.GetBatchSize(), Dtype: pb.DType_DTYPE_F32, Layout: pb.Layout_LAYOUT_CHW,
		SampleShape: []int64{3, 32, 32}, SampleBytes: 12288,
		Transport: pb.Transport_TRANSPORT_INLINE, MaxInFlight: uint32(window),
	}
	if err := s.Send(&pb.StreamReply{Msg: &pb.StreamReply_Header{Header: hdr}}); err != nil {
		return err
	}
	unacked := map[uint64]bool{}
	ack := func() error {
		req, err := s.Recv()
		if err != nil {
			return err
		}
		for _, seq := range req.GetAck().GetSeqs() {
			if !unacked[seq] {
				return status.Errorf(codes.InvalidArgument, "fake: ack of unknown seq %d", seq)
			}
			delete(unacked, seq)
		}
		return nil
	}
	for seq := range uint64(f.batches) {
		for len(unacked) >= window {
			if err := ack(); err != nil {
				return err
			}
		}
		b := cifarBatch(f.batchSize)
		b.Seq = seq
		if err := s.Send(&pb.StreamReply{Msg: &pb.StreamReply_Batch{Batch: b}}); err != nil {
			return err
		}
		unacked[seq] = true
		f.maxObserved = max(f.maxObserved, len(unacked))
	}
	for len(unacked) > 0 {
		if err := ack(); err != nil {
			return err
		}
	}
	return nil
}

// dial serves srv over an in-memory listener.
func dial(t *testing.T, srv pb.LoaderServer) pb.LoaderClient {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	gs := grpc.NewServer(grpc.MaxSendMsgSize(64 << 20))
	pb.RegisterLoaderServer(gs, srv)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	cc, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return pb.NewLoaderClient(cc)
}

func TestStreamOverGRPC(t *testing.T) {
	tests := []struct {
		name      string
		batchSize int
		recvLimit int // 0: gRPC's default of 4 MiB
		window    uint32
		wantCode  codes.Code
	}{
		{"small/window=1", 16, 0, 1, codes.OK},
		{"small/window=3", 16, 0, 3, codes.OK},
		{"6MiB/limit=8MiB", 512, 8 << 20, 2, codes.OK},
		// The reason loader.proto tells inline clients to raise the limit.
		{"6MiB/default-limit", 512, 0, 2, codes.ResourceExhausted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const batches = 5
			srv := &fakeLoader{batches: batches, batchSize: tt.batchSize}
			client := dial(t, srv)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var opts []grpc.CallOption
			if tt.recvLimit > 0 {
				opts = append(opts, grpc.MaxCallRecvMsgSize(tt.recvLimit))
			}
			err := consume(ctx, client, tt.batchSize, tt.window, batches, opts...)
			if got := status.Code(err); got != tt.wantCode {
				t.Fatalf("stream ended with %v (%v), want %v", got, err, tt.wantCode)
			}
			if tt.wantCode == codes.OK && srv.maxObserved > int(tt.window) {
				t.Errorf("server had %d batches unacked, window %d", srv.maxObserved, tt.window)
			}
		})
	}
}

// consume runs a client: Open, expect a header, then n batches in seq
// order, acking each, then the server's OK.
func consume(ctx context.Context, c pb.LoaderClient, bs int, window uint32, n int, opts ...grpc.CallOption) error {
	s, err := c.Stream(ctx, opts...)
	if err != nil {
		return err
	}
	open := &pb.Open{Dataset: "cifar10-train", World: 1, BatchSize: int32(bs), Seed: 1, MaxInFlight: window}
	if err := s.Send(&pb.StreamRequest{Msg: &pb.StreamRequest_Open{Open: open}}); err != nil {
		return err
	}
	first, err := s.Recv()
	if err != nil {
		return err
	}
	if first.GetHeader() == nil {
		return fmt.Errorf("first reply is %T, want a header", first.GetMsg())
	}
	for want := range uint64(n) {
		r, err := s.Recv()
		if err != nil {
			return err
		}
		b := r.GetBatch()
		if b.GetSeq() != want || len(b.GetData()) != bs*12288 || len(b.GetLabels()) != bs {
			return fmt.Errorf("batch seq %d with %d bytes, want seq %d with %d", b.GetSeq(), len(b.GetData()), want, bs*12288)
		}
		ack := &pb.StreamRequest{Msg: &pb.StreamRequest_Ack{Ack: &pb.Ack{Seqs: []uint64{b.GetSeq()}}}}
		if err := s.Send(ack); err != nil {
			return err
		}
	}
	if _, err := s.Recv(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("after the last batch: %v, want end of stream", err)
	}
	return nil
}
