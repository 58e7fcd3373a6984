package server

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

func want(st pb.Loader_StreamClient, nums ...uint64) error {
	return st.Send(&pb.StreamRequest{Msg: &pb.StreamRequest_Want{Want: &pb.Want{Batches: nums}}})
}

// TestOnDemandStream: batches wanted by number come in the order wanted,
// carry their number as seq, and are the batches a plain stream sends at
// those numbers; half-closing ends the stream with OK.
func TestOnDemandStream(t *testing.T) {
	ctx := context.Background()
	_, api, _ := serve(t, Options{}, testDataset("d", testSource{n: 64}))
	o := &pb.Open{Dataset: "d", BatchSize: 5, Seed: 3, Epochs: 2, StartEpoch: 0, StartBatch: 3, MaxInFlight: 3}
	plain, err := openRaw(ctx, api, o)
	if err != nil {
		t.Fatal(err)
	}
	var all []*pb.Batch
	for {
		r, err := plain.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, r.GetBatch())
		if err := ack(plain, r.GetBatch().GetSeq()); err != nil {
			t.Fatal(err)
		}
	}
	od := &pb.Open{Dataset: "d", BatchSize: 5, Seed: 3, Epochs: 2, StartEpoch: 0, StartBatch: 3, MaxInFlight: 3, OnDemand: true}
	st, err := api.Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(open(od)); err != nil {
		t.Fatal(err)
	}
	r, err := st.Recv()
	if err != nil || !r.GetHeader().GetOnDemand() {
		t.Fatalf("header %v, %v: want on_demand echoed", r.GetHeader(), err)
	}
	for _, batch := range [][]uint64{{7, 0, 22}, {uint64(len(all) - 1)}, {4, 5}} {
		if err := want(st, batch...); err != nil {
			t.Fatal(err)
		}
		for _, k := range batch {
			r, err := st.Recv()
			if err != nil {
				t.Fatal(err)
			}
			b, w := r.GetBatch(), all[k]
			if b.GetSeq() != k || b.GetEpoch() != w.GetEpoch() || b.GetBatchIndex() != w.GetBatchIndex() ||
				!bytes.Equal(b.GetData(), w.GetData()) || len(b.GetIndices()) != len(w.GetIndices()) {
				t.Fatalf("wanted %d (epoch %d batch %d), got seq %d (epoch %d batch %d) or other bytes",
					k, w.GetEpoch(), w.GetBatchIndex(), b.GetSeq(), b.GetEpoch(), b.GetBatchIndex())
			}
			if err := ack(st, k); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != io.EOF {
		t.Fatalf("after CloseSend: %v, want the stream to end with OK", err)
	}
}

// TestOnDemandRefusals: a Want breaking the window rules, past the end,
// or on a plain stream is INVALID_ARGUMENT with a message that says which.
func TestOnDemandRefusals(t *testing.T) {
	ctx := context.Background()
	_, api, _ := serve(t, Options{}, testDataset("d", testSource{n: 64}))
	for _, tc := range []struct {
		name     string
		onDemand bool
		wants    [][]uint64
		msg      string
	}{
		{"plain", false, [][]uint64{{0}}, "not opened on demand"},
		{"window", true, [][]uint64{{0, 1, 2, 3}}, "over the window of 3"},
		{"twice", true, [][]uint64{{1}, {1}}, "wanted again"},
		{"past-end", true, [][]uint64{{13}}, "past the stream's 13 batches"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := openRaw(ctx, api, &pb.Open{Dataset: "d", BatchSize: 5, Epochs: 1, MaxInFlight: 3, OnDemand: tc.onDemand})
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.wants {
				if err := want(st, w...); err != nil {
					break
				}
			}
			for err == nil {
				_, err = st.Recv()
			}
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v, want INVALID_ARGUMENT saying %q", err, tc.msg)
			}
		})
	}
}
