package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// histogram returns the count and sum of a dataset's histogram series.
func histogram(t *testing.T, srv *Server, name, dataset string) (uint64, float64) {
	t.Helper()
	mfs, err := srv.opts.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if mf.GetName() == name && len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == dataset {
				return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
			}
		}
	}
	return 0, 0
}

// TestAckWaitNs: the waits an ack carries reach the client-wait
// histogram, one per batch; an ack without them adds nothing; a wait
// longer than the stream's life is cut to it; a list that is not parallel
// to the seqs is refused, naming both lengths.
func TestAckWaitNs(t *testing.T) {
	cases := []struct {
		name      string
		waits     func(seq uint64) (seqs, waits []uint64)
		count     uint64
		sum       func(sum float64) bool
		errSubstr string
	}{
		{"one per batch", func(s uint64) ([]uint64, []uint64) { return []uint64{s, s + 1}, []uint64{5e6, 0} }, 2,
			func(sum float64) bool { return sum == 0.005 }, ""},
		{"none from an older client", func(s uint64) ([]uint64, []uint64) { return []uint64{s, s + 1}, nil }, 0,
			func(sum float64) bool { return sum == 0 }, ""},
		{"cut to the stream's age", func(s uint64) ([]uint64, []uint64) { return []uint64{s}, []uint64{1 << 62} }, 1,
			func(sum float64) bool { return sum > 0 && sum < 60 }, ""},
		{"not parallel", func(s uint64) ([]uint64, []uint64) { return []uint64{s, s + 1}, []uint64{1} }, 0,
			func(sum float64) bool { return sum == 0 }, "ack of 2 batches with 1 wait_ns"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, api, _ := serve(t, Options{}, testDataset("good", testSource{n: 64}))
			ctx := context.Background()
			st, err := openRaw(ctx, api, &pb.Open{Dataset: "good", BatchSize: 8, MaxInFlight: 2})
			if err != nil {
				t.Fatal(err)
			}
			r0, err := st.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Recv(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond) // waits are cut to the stream's age
			seqs, waits := tc.waits(r0.GetBatch().GetSeq())
			if err := st.Send(&pb.StreamRequest{Msg: &pb.StreamRequest_Ack{Ack: &pb.Ack{Seqs: seqs, WaitNs: waits}}}); err != nil {
				t.Fatal(err)
			}
			if tc.errSubstr != "" {
				_, err := drainRaw(st)
				if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.errSubstr) {
					t.Fatalf("got %v, want InvalidArgument saying %q", err, tc.errSubstr)
				}
			} else {
				// The acks freed the window: the next batch proves they were
				// read; the last wait is recorded just after its ack.
				if _, err := st.Recv(); err != nil {
					t.Fatal(err)
				}
				for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
					if n, _ := histogram(t, srv, "loaderd_client_wait_seconds", "good"); n >= tc.count {
						break
					}
				}
			}
			count, sum := histogram(t, srv, "loaderd_client_wait_seconds", "good")
			if count != tc.count || !tc.sum(sum) {
				t.Errorf("histogram count %d sum %g; want count %d", count, sum, tc.count)
			}
		})
	}
}

// TestStreamNumbers: open streams take the smallest free number, which
// loaderd_stream_info describes, and an ended stream's number is reused.
func TestStreamNumbers(t *testing.T) {
	srv, api, _ := serve(t, Options{}, testDataset("good", testSource{n: 64}))
	info := func() map[string]string { // stream number -> client
		mfs, err := srv.opts.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, mf := range mfs {
			if mf.GetName() != "loaderd_stream_info" {
				continue
			}
			for _, m := range mf.GetMetric() {
				l := map[string]string{}
				for _, lp := range m.GetLabel() {
					l[lp.GetName()] = lp.GetValue()
				}
				out[l["stream"]] = l["client"]
			}
		}
		return out
	}
	open := func(name string) context.CancelFunc {
		ctx, cancel := context.WithCancel(context.Background())
		if _, err := openRaw(ctx, api, &pb.Open{Dataset: "good", BatchSize: 8, ClientName: name}); err != nil {
			t.Fatal(err)
		}
		return cancel
	}
	stopA := open("a")
	stopB := open("b")
	defer stopB()
	if got := info(); got["0"] != "a" || got["1"] != "b" || len(got) != 2 {
		t.Fatalf("stream info %v, want 0:a 1:b", got)
	}
	stopA()
	waitFor(t, func() bool { return len(info()) == 1 })
	stopC := open("c")
	defer stopC()
	if got := info(); got["0"] != "c" || got["1"] != "b" {
		t.Fatalf("stream info %v, want the freed 0 reused: 0:c 1:b", got)
	}
}
