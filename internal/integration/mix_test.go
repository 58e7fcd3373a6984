package integration_test

import (
	"bytes"
	"context"
	"io"
	"math"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loaderd/loaderd/client"
	"github.com/loaderd/loaderd/client/sample"
	_ "github.com/loaderd/loaderd/loader/format/synthetic"
)

// TestBatchMix streams a chain ending with mixup and cutmix through a
// daemon, inline and over shared memory, in f16 HWC: the header gives
// the classes and says the batches are mixed; each batch's record is the
// mixer's draw for (seed, epoch, rank, batch); its bytes are its samples
// augmented with their params, then mixed as recorded; and its soft
// labels sum to 1 with λ and 1-λ at the right classes.
func TestBatchMix(t *testing.T) {
	const spec, seed, rank = "synthetic:61", 11, 1
	src, pipe, c := served(t, spec, "crop=32:4,flip,normalize=cifar10,out=f16:hwc,mixup=0.4,cutmix=1", "syn")
	m, sz, classes := pipe.Mixer(), pipe.Out().Bytes(), len(src.Classes())
	want, tmp, scratch := make([]byte, 8*sz), make([]byte, sz), make([]byte, src.Spec().Bytes())
	soft := make([]float32, 8*classes)
	for _, shm := range []bool{false, true} {
		s, err := c.Open(context.Background(), client.StreamConfig{Dataset: "syn", BatchSize: 8, Seed: seed,
			Rank: rank, World: 2, Augment: pipe.String(), SharedMemory: shm, IncludeParams: true, Epochs: 2})
		if err != nil {
			t.Fatal(err)
		}
		if h := s.Header(); int(h.GetNumClasses()) != classes || !h.GetBatchMix() {
			t.Fatalf("header: %d classes, batch_mix %v; want %d, true", h.GetNumClasses(), h.GetBatchMix(), classes)
		}
		kinds := map[sample.MixKind]int{}
		for {
			b, err := s.Next(context.Background())
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			mx, n := b.Mix(), b.Len()
			if d := m.Draw(seed, b.Epoch, rank, b.Index); mx != d {
				t.Fatalf("shm %v batch %d/%d: mix %+v, drawn %+v", shm, b.Epoch, b.Index, mx, d)
			}
			kinds[mx.Kind]++
			for k, idx := range b.Indices {
				_, pix, _ := src.Sample(idx, scratch)
				if err := pipe.Apply(want[k*sz:(k+1)*sz], pix, b.Params[k]); err != nil {
					t.Fatal(err)
				}
			}
			if err := m.Apply(want[:n*sz], n, mx, tmp); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b.Data, want[:n*sz]) {
				t.Fatalf("shm %v batch %d/%d: bytes differ from the samples mixed as %+v", shm, b.Epoch, b.Index, mx)
			}
			if err := b.SoftLabels(soft); err != nil {
				t.Fatal(err)
			}
			checkSoft(t, soft[:n*classes], b.Labels, classes, mx)
			if err := b.Release(); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if kinds[sample.MixUp] == 0 || kinds[sample.CutMix] == 0 {
			t.Fatalf("shm %v: mix kinds %v, want both", shm, kinds)
		}
	}
	for _, tc := range []struct {
		cfg  client.StreamConfig
		want string
	}{
		{client.StreamConfig{Augment: "crop=32:4,out=u8,mixup=0.2"}, "mixes float tensors"},
		{client.StreamConfig{Augment: "normalize=cifar10,mixup=0.2,out=f16"}, "end the chain"},
		{client.StreamConfig{Augment: "normalize=cifar10,cutmix=1", ValuesOnClient: true}, "values_on_client"},
	} {
		tc.cfg.Dataset, tc.cfg.BatchSize = "syn", 4
		_, err := c.Open(context.Background(), tc.cfg)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q, values on client %v) = %v, want InvalidArgument with %q", tc.cfg.Augment, tc.cfg.ValuesOnClient, err, tc.want)
		}
	}
}

// checkSoft: each row sums to 1 and holds float32(λ) at its class and
// float32(1-λ) at its rolled partner's (their float32 sum when the same).
func checkSoft(t *testing.T, soft []float32, labels []int32, classes int, mx sample.Mix) {
	t.Helper()
	n := len(labels)
	own, other := float32(mx.Lambda), float32(1-mx.Lambda)
	for i, y := range labels {
		row := soft[i*classes : (i+1)*classes]
		prev := labels[(i+n-1)%n]
		var sum float64
		for k, v := range row {
			sum += float64(v)
			var w float32
			switch {
			case int32(k) == y && y == prev:
				w = own + other
			case int32(k) == y:
				w = own
			case int32(k) == prev:
				w = other
			}
			if v != w {
				t.Fatalf("row %d (label %d, partner %d) class %d: %v, want %v", i, y, prev, k, v, w)
			}
		}
		if math.Abs(sum-1) > 1e-6 {
			t.Fatalf("row %d sums to %v", i, sum)
		}
	}
}
