package client_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loaderd/loaderd/client"
	"github.com/loaderd/loaderd/client/clienttest"
	"github.com/loaderd/loaderd/client/sample"
	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
	"github.com/loaderd/loaderd/sampler"
)

// delivered is one delivered sample.
type delivered struct {
	label int32
	prm   sample.Params
	data  []byte
}

// take reads up to max batches (0: to the end) from a fresh stream and
// returns its samples by index and the position after the last batch.
func take(t *testing.T, c *client.Client, cfg client.StreamConfig, max int, out *[]int64, by map[int64][]delivered) (*client.Stream, sampler.Position) {
	t.Helper()
	ctx := context.Background()
	s, err := c.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	after := cfg.Start
	for n := 0; max == 0 || n < max; n++ {
		b, err := s.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if b.Epoch == cfg.Start.Epoch && b.Offset != cfg.Start.Offset {
			t.Fatalf("batch %v of a stream started at %v", b.Position(), cfg.Start)
		}
		sz := len(b.Data) / len(b.Indices)
		for k, i := range b.Indices {
			*out = append(*out, i)
			by[i] = append(by[i], delivered{b.Labels[k], b.Params[k], bytes.Clone(b.Data[k*sz : (k+1)*sz])})
		}
		after = s.After(b)
		if err := b.Release(); err != nil {
			t.Fatal(err)
		}
	}
	return s, after
}

// TestElasticResume goes through a real daemon: epoch 2 of a world of W
// ranks stops after k batches each, and W′ ranks finish it from the
// global position the streams give (4→2, 2→3, 3→1, 1→4, several k). Over
// the epoch the indices are every index once plus the last world's
// padding (the first entries of the epoch's order), and each sample's
// label, crop/flip and bytes are an uninterrupted one-rank run's.
func TestElasticResume(t *testing.T) {
	const n, bs, epoch = 101, 4, 2
	c := startDaemon(t, n)
	base := client.StreamConfig{Dataset: "train", BatchSize: bs, Seed: 9, IncludeParams: true, Prefetch: 2,
		Start: sampler.Position{Epoch: epoch}, Epochs: 1}
	var all []int64
	ref := map[int64][]delivered{}
	one := base
	one.BatchSize = 16
	take(t, c, one, 0, &all, ref)
	if len(all) != n || len(ref) != n {
		t.Fatalf("the uninterrupted run gave %d samples, %d indices", len(all), len(ref))
	}
	order := sampler.NewPerm(n, sampler.EpochKey(9, epoch))
	for _, tr := range [][2]int{{4, 2}, {2, 3}, {3, 1}, {1, 4}} {
		w, w2 := tr[0], tr[1]
		per := sampler.Distributed{N: n, World: w}.BatchesFrom(0, bs, false)
		for _, k := range []int{1, int(per) / 2, int(per) - 1} {
			t.Run(fmt.Sprintf("%d->%d/k=%d", w, w2, k), func(t *testing.T) {
				var got []int64
				by := map[int64][]delivered{}
				var g sampler.Position
				for r := range w {
					cfg := base
					cfg.Rank, cfg.World = r, w
					s, after := take(t, c, cfg, k, &got, by)
					gr, err := s.Global(after)
					if err != nil {
						t.Fatal(err)
					}
					if r > 0 && gr != g {
						t.Fatalf("rank %d resumes at %v, rank 0 at %v", r, gr, g)
					}
					g = gr
					s.Close()
				}
				if g != (sampler.Position{Epoch: epoch, Offset: int64(k * bs * w)}) {
					t.Fatalf("global position %v after %d batches of %d ranks", g, k, w)
				}
				for r := range w2 {
					cfg := base
					cfg.Rank, cfg.World, cfg.Start = r, w2, g
					take(t, c, cfg, 0, &got, by)
				}
				rest := n - g.Offset
				pad := (rest+int64(w2)-1)/int64(w2)*int64(w2) - rest
				want := slices.Clone(all)
				for j := range pad {
					want = append(want, order.At(j))
				}
				slices.Sort(got)
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Fatalf("delivered %v\nwant %v", got, want)
				}
				for i, ss := range by {
					for _, s := range ss {
						r := ref[i][0]
						if s.label != r.label || s.prm != r.prm || !bytes.Equal(s.data, r.data) {
							t.Fatalf("index %d: label %d %+v, uninterrupted %d %+v (or the bytes differ)", i, s.label, s.prm, r.label, r.prm)
						}
					}
				}
			})
		}
	}
}

// TestElasticReconnect: a stream resumed at an offset that loses its
// daemon reopens with the offset it was at (until the epoch ends), and a
// daemon that does not echo start_offset is refused rather than trusted.
func TestElasticReconnect(t *testing.T) {
	var mu sync.Mutex
	var opens []*pb.Open
	gone := status.Error(codes.Unavailable, "daemon stopping")
	c := startScript(t, func(_ int, o *pb.Open) ([]*pb.StreamReply, error) {
		mu.Lock()
		opens = append(opens, o)
		mu.Unlock()
		h := &pb.StreamHeader{DatasetSize: 20, BatchesPerEpoch: 5, BatchSize: 2, SampleBytes: 1, MaxInFlight: 2,
			StartEpoch: o.GetStartEpoch(), StartBatch: o.GetStartBatch(), StartOffset: o.GetStartOffset()}
		out := []*pb.StreamReply{{Msg: &pb.StreamReply_Header{Header: h}}}
		// World 2, batch 2, offset 8: 12 left, 6 per rank, 3 batches.
		p := sampler.Position{Epoch: o.GetStartEpoch(), Batch: o.GetStartBatch(), Offset: o.GetStartOffset()}
		for range 2 {
			if p.Epoch >= o.GetStartEpoch()+o.GetEpochs() {
				return out, nil
			}
			out = append(out, &pb.StreamReply{Msg: &pb.StreamReply_Batch{Batch: &pb.Batch{Epoch: p.Epoch,
				BatchIndex: p.Batch, Indices: []int64{1, 2}, Tensor: &pb.Batch_Data{Data: []byte{1, 2}}}}})
			n := int64(5)
			if p.Offset != 0 {
				n = 3
			}
			p = p.Next(n)
		}
		return out, gone
	})
	ctx := context.Background()
	s, err := c.Open(ctx, client.StreamConfig{Dataset: "x", World: 2, BatchSize: 2, Epochs: 2,
		Start: sampler.Position{Epoch: 3, Offset: 8}, ReconnectWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var got []sampler.Position
	for {
		b, err := s.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, b.Position())
		b.Release()
	}
	want := []sampler.Position{{Epoch: 3, Offset: 8}, {Epoch: 3, Batch: 1, Offset: 8}, {Epoch: 3, Batch: 2, Offset: 8}}
	for b := range int64(5) {
		want = append(want, sampler.Position{Epoch: 4, Batch: b})
	}
	if !slices.Equal(got, want) {
		t.Fatalf("batches at %v\nwant %v", got, want)
	}
	mu.Lock()
	defer mu.Unlock()
	var starts []sampler.Position
	for _, o := range opens {
		starts = append(starts, sampler.Position{Epoch: o.GetStartEpoch(), Batch: o.GetStartBatch(), Offset: o.GetStartOffset()})
	}
	if ws := []sampler.Position{want[0], want[2], want[4], want[6]}; !slices.Equal(starts, ws) {
		t.Errorf("opened at %v, want %v", starts, ws)
	}

	old := startFake(t, &pb.StreamReply{Msg: &pb.StreamReply_Header{Header: &pb.StreamHeader{
		DatasetSize: 20, BatchesPerEpoch: 5, BatchSize: 2, SampleBytes: 1, MaxInFlight: 2}}})
	_, err = old.Open(ctx, client.StreamConfig{Dataset: "x", World: 2, BatchSize: 2, Start: sampler.Position{Offset: 8}, Reconnects: -1})
	if err == nil || !strings.Contains(err.Error(), "too old for an elastic resume") {
		t.Errorf("a daemon ignoring start_offset: %v", err)
	}
}

// TestElasticResumeWeighted: a dataset drawn with replacement
// (sampler=balanced&samples=K, K ≠ N) resumes elastically as an order
// does, over its K draws: the header says K, Global counts draws, and a
// world of 3 stopped after 4 batches (48 draws, past N = 40), finished by
// a world of 2, delivers
// the uninterrupted one-rank draw list plus the last world's padding (the
// list's first entries).
func TestElasticResumeWeighted(t *testing.T) {
	const k, bs, epoch = 61, 4, 1
	d := clienttest.Start(t, "--dataset", "train=synthetic:40?sampler=balanced&samples=61", "--workers", "2")
	c := d.Dial(t)
	base := client.StreamConfig{Dataset: "train", BatchSize: bs, Seed: 3, IncludeParams: true, Start: sampler.Position{Epoch: epoch}, Epochs: 1}
	dss, err := c.Datasets(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(dss) != 1 || dss[0].GetEpochSamples() != k || dss[0].GetSize() != 40 {
		t.Fatalf("ListDatasets says %v, want size 40, epoch_samples %d", dss, k)
	}
	var all []int64
	s, _ := take(t, c, base, 0, &all, map[int64][]delivered{})
	if got := s.Header().GetEpochSamples(); got != k {
		t.Fatalf("header's epoch_samples %d, want %d", got, k)
	}
	if len(all) != k {
		t.Fatalf("one rank got %d draws, want %d", len(all), k)
	}
	var got []int64
	var g sampler.Position
	for r := range 3 {
		cfg := base
		cfg.Rank, cfg.World = r, 3
		s, after := take(t, c, cfg, 4, &got, map[int64][]delivered{})
		var err error
		if g, err = s.Global(after); err != nil {
			t.Fatal(err)
		}
	}
	if g != (sampler.Position{Epoch: epoch, Offset: 4 * bs * 3}) {
		t.Fatalf("global position %v", g)
	}
	for r := range 2 {
		cfg := base
		cfg.Rank, cfg.World, cfg.Start = r, 2, g
		take(t, c, cfg, 0, &got, map[int64][]delivered{})
	}
	want := append(slices.Clone(all), all[:(k-g.Offset)%2]...)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("delivered %v\nwant %v", got, want)
	}
}
