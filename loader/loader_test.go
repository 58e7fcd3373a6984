package loader_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/loader"
	_ "github.com/loaderd/loaderd/loader/format/cifar"
	"github.com/loaderd/loaderd/loader/format/synthetic"
	"github.com/loaderd/loaderd/sampler"
)

// got is a delivered batch, copied out before release.
type got struct {
	seq, epoch, index int64
	indices           []int64
	labels            []int32
	params            []sample.Params
	data              []byte
}

// testPipeline is the CIFAR training augmentation for src.
func testPipeline(t testing.TB, src loader.Source) *augment.Pipeline {
	t.Helper()
	pipe, err := augment.NewPipeline(src.Spec(), augment.CIFARTrain(sample.F32, sample.CHW)...)
	if err != nil {
		t.Fatal(err)
	}
	return pipe
}

func newTestLoader(t testing.TB, pool *loader.Pool, src loader.Source, mod func(*loader.Config)) *loader.Loader {
	t.Helper()
	pipe := testPipeline(t, src)
	cfg := loader.Config{Source: src, Pipeline: pipe, World: 1, Seed: 42, Shuffle: true, BatchSize: 7, Epochs: 3, WithParams: true}
	if mod != nil {
		mod(&cfg)
	}
	l, err := loader.New(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// drain reads the stream to its end (or max batches).
func drain(t testing.TB, l *loader.Loader, max int) []got {
	t.Helper()
	var out []got
	for len(out) < max || max == 0 {
		b, err := l.Next(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, got{b.Seq, b.Epoch, b.Index, append([]int64(nil), b.Indices...),
			append([]int32(nil), b.Labels...), append([]sample.Params(nil), b.Params...), bytes.Clone(b.Data)})
		if err := b.Release(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func sameBatches(t *testing.T, a, b []got) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%d batches vs %d", len(a), len(b))
	}
	for i := range a {
		if fmt.Sprint(a[i].epoch, a[i].index, a[i].indices, a[i].labels, a[i].params) != fmt.Sprint(b[i].epoch, b[i].index, b[i].indices, b[i].labels, b[i].params) ||
			!bytes.Equal(a[i].data, b[i].data) {
			t.Fatalf("batch %d differs: epoch/index %d/%d vs %d/%d", i, a[i].epoch, a[i].index, b[i].epoch, b[i].index)
		}
	}
}

// TestWorkersMetamorphic: 1 worker and 4 workers give byte-identical batches.
func TestWorkersMetamorphic(t *testing.T) {
	for _, spec := range []string{"synthetic:300", "cifar:testdata/cifar10"} {
		t.Run(spec, func(t *testing.T) {
			src, err := loader.Open(spec)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			p1, p4 := loader.NewPool(1), loader.NewPool(4)
			defer p1.Close()
			defer p4.Close()
			a := drain(t, newTestLoader(t, p1, src, nil), 0)
			b := drain(t, newTestLoader(t, p4, src, func(c *loader.Config) { c.InFlight = 3 }), 0)
			sameBatches(t, a, b)
			perEpoch := (src.Len() + 6) / 7
			if int64(len(a)) != 3*perEpoch {
				t.Fatalf("%d batches, want 3 epochs of %d", len(a), perEpoch)
			}
			// Each epoch covers the dataset once, in a new order.
			for e := int64(0); e < 3; e++ {
				seen := map[int64]bool{}
				for _, g := range a[e*perEpoch : (e+1)*perEpoch] {
					for _, i := range g.indices {
						seen[i] = true
					}
				}
				if int64(len(seen)) != src.Len() {
					t.Fatalf("epoch %d covers %d of %d samples", e, len(seen), src.Len())
				}
			}
			if fmt.Sprint(a[0].indices) == fmt.Sprint(a[perEpoch].indices) {
				t.Fatal("epochs 0 and 1 start in the same order")
			}
		})
	}
}

// TestBatchMatchesPipeline checks every sample of a batch is the pipeline
// applied to the source sample with the recorded parameters.
func TestBatchMatchesPipeline(t *testing.T) {
	src, _ := loader.Open("cifar:testdata/cifar10")
	defer src.Close()
	pool := loader.NewPool(2)
	defer pool.Close()
	l := newTestLoader(t, pool, src, nil)
	pipe := testPipeline(t, src) // newTestLoader's
	want := make([]byte, pipe.Out().Bytes())
	for _, g := range drain(t, l, 5) {
		for k, idx := range g.indices {
			label, pix, _ := src.Sample(idx, nil)
			if label != g.labels[k] || g.params[k] != pipe.Draw(42, g.epoch, idx) {
				t.Fatalf("sample %d: label or params differ", idx)
			}
			pipe.Apply(want, pix, g.params[k])
			if !bytes.Equal(want, g.data[k*len(want):(k+1)*len(want)]) {
				t.Fatalf("sample %d: pixels differ from the pipeline's output", idx)
			}
		}
	}
}

// TestResume: a stream started at (epoch, batch) continues the exact
// sequence of an uninterrupted one.
func TestResume(t *testing.T) {
	src := synthetic.New(100, 0)
	pool := loader.NewPool(2)
	defer pool.Close()
	all := drain(t, newTestLoader(t, pool, src, nil), 0)
	for _, start := range []sampler.Position{{Epoch: 0, Batch: 3}, {Epoch: 1, Batch: 0}, {Epoch: 2, Batch: 14}} {
		rest := drain(t, newTestLoader(t, pool, src, func(c *loader.Config) { c.Start = start }), 0)
		skip := int(start.Epoch*15 + start.Batch)
		sameBatches(t, all[skip:], rest)
	}
}

// TestRanksPartitionEpoch: two ranks of world 2 see disjoint halves.
func TestRanksPartitionEpoch(t *testing.T) {
	src := synthetic.New(101, 0)
	pool := loader.NewPool(2)
	defer pool.Close()
	seen := map[int64]int{}
	counts := [2]int{}
	for r := range 2 {
		for _, g := range drain(t, newTestLoader(t, pool, src, func(c *loader.Config) { c.Rank, c.World, c.Epochs = r, 2, 1 }), 0) {
			for _, i := range g.indices {
				seen[i]++
				counts[r]++
			}
		}
	}
	if counts[0] != 51 || counts[1] != 51 || len(seen) != 101 {
		t.Fatalf("ranks got %v samples covering %d indices; want 51 each covering 101", counts, len(seen))
	}
}

// TestSampleErrorStopsStream: a bad record fails the stream with an error
// naming the file and record; batches before it are delivered intact.
func TestSampleErrorStopsStream(t *testing.T) {
	src, err := loader.Open("cifar:testdata/bad")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	pool := loader.NewPool(2)
	defer pool.Close()
	l := newTestLoader(t, pool, src, func(c *loader.Config) { c.Shuffle, c.BatchSize = false, 1 })
	for i := 0; i < 2; i++ {
		b, err := l.Next(context.Background())
		if err != nil || b.Indices[0] != int64(i) {
			t.Fatalf("batch %d: %v", i, err)
		}
		b.Release()
	}
	_, err = l.Next(context.Background())
	var re *loader.RecordError
	var se *loader.SampleError
	if !errors.Is(err, loader.ErrLabel) || !errors.As(err, &re) || !errors.As(err, &se) || re.Record != 2 || filepath.Base(re.File) != "data_batch_1.bin" || se.Index != 2 {
		t.Fatalf("got %v, want a label error for data_batch_1.bin record 2", err)
	}
	if _, again := l.Next(context.Background()); again != err {
		t.Fatalf("failed stream returned %v afterwards", again)
	}
}

func TestNextCancelAndClose(t *testing.T) {
	src := synthetic.New(100, 0)
	pool := loader.NewPool(1)
	defer pool.Close()
	l := newTestLoader(t, pool, src, func(c *loader.Config) { c.InFlight = 2 })
	var held []*loader.Batch
	for range 2 {
		b, err := l.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, b)
	}
	// Every batch is held: Next waits for a release until its context ends.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := l.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next with all batches held: %v", err)
	}
	if err := held[0].Release(); err != nil {
		t.Fatal(err)
	}
	if err := held[0].Release(); err == nil {
		t.Fatal("second release succeeded")
	}
	b, err := l.Next(context.Background())
	if err != nil || b.Seq != 2 {
		t.Fatalf("after release: seq %v, %v", b, err)
	}
	errc := make(chan error)
	go func() { _, err := l.Next(context.Background()); errc <- err }()
	time.Sleep(10 * time.Millisecond)
	l.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, loader.ErrClosed) {
			t.Fatalf("Next during Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Next still waiting after Close")
	}
}

func TestConfigErrors(t *testing.T) {
	src := synthetic.New(10, 0)
	pipe, _ := augment.NewPipeline(src.Spec(), augment.CIFARTrain(sample.F32, sample.CHW)...)
	pool := loader.NewPool(1)
	defer pool.Close()
	_, err := loader.New(pool, loader.Config{Source: src, Pipeline: pipe, Rank: 3, World: 2, BatchSize: 0, Epochs: 1, Start: sampler.Position{Epoch: 2}})
	if err == nil {
		t.Fatal("bad config accepted")
	}
	// Every problem is reported at once.
	for _, want := range []string{"batch size 0", "start epoch 2", "rank"} {
		if !bytes.Contains([]byte(err.Error()), []byte(want)) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// TestSteadyStateAllocs: Next + Release allocate nothing per batch.
func TestSteadyStateAllocs(t *testing.T) {
	src := synthetic.New(100000, 0)
	pool := loader.NewPool(2)
	defer pool.Close()
	l := newTestLoader(t, pool, src, func(c *loader.Config) { c.BatchSize, c.Epochs = 64, 0 })
	ctx := context.Background()
	step := func() {
		b, err := l.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b.Release()
	}
	for range 20 {
		step()
	}
	if n := testing.AllocsPerRun(200, step); n != 0 {
		t.Fatalf("%v allocations per batch, want 0", n)
	}
}
