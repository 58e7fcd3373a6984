package loader_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/loader"
)

// mixed is a delivered batch with its mix record.
type mixed struct {
	got
	mix sample.Mix
}

func drainMixed(t *testing.T, l *loader.Loader) []mixed {
	t.Helper()
	var out []mixed
	for {
		b, err := l.Next(context.Background())
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, mixed{got{b.Seq, b.Epoch, b.Index, append([]int64(nil), b.Indices...),
			append([]int32(nil), b.Labels...), append([]sample.Params(nil), b.Params...), bytes.Clone(b.Data)}, b.Mix})
		if err := b.Release(); err != nil {
			t.Fatal(err)
		}
	}
}

func mixPipeline(t *testing.T, in augment.Spec, spec string) *augment.Pipeline {
	t.Helper()
	ops, err := augment.ParseOps(spec)
	if err != nil {
		t.Fatal(err)
	}
	pipe, err := augment.NewPipeline(in, ops...)
	if err != nil {
		t.Fatal(err)
	}
	return pipe
}

// TestWorkersMetamorphicMix: with mixup and cutmix, 1 and 4 workers give
// identical batches and mix records, each record is the Mixer's draw for
// (seed, epoch, rank, batch), and each batch is its samples augmented
// with their params, then mixed as recorded.
func TestWorkersMetamorphicMix(t *testing.T) {
	src, err := loader.Open("cifar:testdata/cifar10")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for _, spec := range []string{
		"crop=32:4,flip,normalize=cifar10,out=f32:chw,mixup=0.2,cutmix=1",
		"crop=32:4,flip,normalize=cifar10,out=bf16:hwc,random_erasing,cutmix=1",
	} {
		pipe := mixPipeline(t, src.Spec(), spec)
		p1, p4 := loader.NewPool(1), loader.NewPool(4)
		use := func(c *loader.Config) { c.Pipeline, c.Epochs, c.Rank, c.World = pipe, 2, 1, 2 }
		a := drainMixed(t, newTestLoader(t, p1, src, use))
		b := drainMixed(t, newTestLoader(t, p4, src, func(c *loader.Config) { use(c); c.InFlight = 3 }))
		p1.Close()
		p4.Close()
		if len(a) != len(b) || len(a) == 0 {
			t.Fatalf("%s: %d batches vs %d", spec, len(a), len(b))
		}
		m, sz := pipe.Mixer(), pipe.Out().Bytes()
		kinds := map[sample.MixKind]int{}
		for i := range a {
			if !bytes.Equal(a[i].data, b[i].data) || a[i].mix != b[i].mix {
				t.Fatalf("%s: batch %d differs between 1 and 4 workers (mix %+v vs %+v)", spec, i, a[i].mix, b[i].mix)
			}
			g := a[i]
			if want := m.Draw(42, g.epoch, 1, g.index); g.mix != want {
				t.Fatalf("%s: batch %d records %+v, the mixer draws %+v", spec, i, g.mix, want)
			}
			kinds[g.mix.Kind]++
			n := len(g.indices)
			want := make([]byte, n*sz)
			for k, idx := range g.indices {
				_, pix, _ := src.Sample(idx, nil)
				if err := pipe.Apply(want[k*sz:(k+1)*sz], pix, g.params[k]); err != nil {
					t.Fatal(err)
				}
			}
			if err := m.Apply(want, n, g.mix, make([]byte, sz)); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(want, g.data) {
				t.Fatalf("%s: batch %d is not its samples mixed as %+v", spec, i, g.mix)
			}
		}
		if kinds[sample.NoMix] > 0 || len(kinds) == 0 {
			t.Fatalf("%s: mix kinds %v", spec, kinds)
		}
	}
}

// TestMixSampleError: a batch with a sample that fails is not mixed and
// fails the stream with the sample's error, as without batch ops.
func TestMixSampleError(t *testing.T) {
	src, err := loader.Open("cifar:testdata/bad")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	pool := loader.NewPool(2)
	defer pool.Close()
	pipe := mixPipeline(t, src.Spec(), "crop=32:4,normalize=cifar10,out=f16,mixup=1")
	l := newTestLoader(t, pool, src, func(c *loader.Config) { c.Pipeline, c.Shuffle, c.BatchSize = pipe, false, 4 })
	_, err = l.Next(context.Background())
	var se *loader.SampleError
	if !errors.Is(err, loader.ErrLabel) || !errors.As(err, &se) || se.Index != 2 {
		t.Fatalf("got %v, want sample 2's label error", err)
	}
}
