package loader_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/sampler"
)

// torchRank1 is what PyTorch yields for rank 1 of 3 over 103 samples,
// seed 42, epoch 2 (Debian's torch 1.13):
//
//	s = DistributedSampler(range(103), num_replicas=3, rank=1, shuffle=True, seed=42)
//	s.set_epoch(2); list(s)
var torchRank1 = []int64{66, 43, 91, 51, 72, 10, 22, 99, 20, 8, 100, 54, 15, 63, 83, 13, 96, 61,
	4, 37, 33, 47, 55, 77, 87, 101, 84, 34, 45, 60, 64, 14, 70, 80, 6}

// torchDrop is rank 3 of 4 over 98 samples, seed 42, epoch 1, with
// drop_last=True: 24 samples, the last 2 of the epoch's order dropped.
var torchDrop = []int64{15, 82, 18, 68, 38, 78, 49, 74, 51, 3, 13, 6, 7, 67, 22, 60, 20, 29, 66, 35, 63, 79, 56, 48}

// TestOrderTorch: a stream of a dataset opened with order=torch delivers,
// in batches, the indices DistributedSampler gives its rank, from the
// start of an epoch and when resumed mid-epoch (as a run that began in a
// PyTorch DataLoader is), the stream's seed and epoch being torch's.
func TestOrderTorch(t *testing.T) {
	pool := loader.NewPool(2)
	defer pool.Close()
	cases := []struct {
		spec         string
		world, rank  int
		epoch, batch int64
		dropLast     bool
		want         []int64
	}{
		{"synthetic:103?order=torch", 3, 1, 2, 0, false, torchRank1},
		{"synthetic:103?order=torch", 3, 1, 2, 3, false, torchRank1[3*7:]},
		{"synthetic:103?order=torch:legacy", 3, 1, 2, 4, false, torchRank1[4*7:]},
		{"synthetic:98?order=torch", 4, 3, 1, 0, true, torchDrop},
		{"synthetic:98?order=torch", 4, 3, 1, 2, true, torchDrop[2*7:]},
	}
	for _, c := range cases {
		src, err := loader.Open(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		l := newTestLoader(t, pool, src, func(cfg *loader.Config) {
			cfg.World, cfg.Rank, cfg.DropLast = c.world, c.rank, c.dropLast
			cfg.Start, cfg.Epochs = sampler.Position{Epoch: c.epoch, Batch: c.batch}, c.epoch+1
		})
		var all []int64
		for k, b := range drain(t, l, 0) {
			if b.epoch != c.epoch || b.index != c.batch+int64(k) || len(b.indices) > 7 {
				t.Fatalf("%s: batch %d is epoch %d batch %d of %d", c.spec, k, b.epoch, b.index, len(b.indices))
			}
			all = append(all, b.indices...)
		}
		if !slices.Equal(all, c.want) {
			t.Errorf("%s world %d rank %d from %d/%d:\n got %v\nwant %v", c.spec, c.world, c.rank, c.epoch, c.batch, all, c.want)
		}
		l.Close()
		src.Close()
	}
}

// TestOrderOption: order= is every format's for the orders that need
// nothing of it; order=shards stays the format's (tar's), so others
// refuse it as an unknown option.
func TestOrderOption(t *testing.T) {
	for spec, want := range map[string]sampler.Order{
		"synthetic:100":                                          sampler.Uniform,
		"synthetic:100?order=uniform":                            sampler.Uniform,
		"synthetic:100?order=torch":                              sampler.Torch,
		"synthetic:100?order=torch%3Alegacy":                     sampler.TorchLegacy,
		"synthetic:1000?holdout=20&order=torch":                  sampler.Torch,
		"synthetic:1000?order=torch:legacy&holdout=0.1&part=val": sampler.TorchLegacy,
	} {
		src, err := loader.Open(spec)
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		if got := loader.OrderOf(src); got != want {
			t.Errorf("%s: order %v, want %v", spec, got, want)
		}
		if want != sampler.Uniform && !strings.HasSuffix(src.String(), "order="+want.String()) {
			t.Errorf("%s: named %s", spec, src)
		}
		// A part split off later keeps the order, over its own indices.
		if part, err := loader.Split(src, 1, false); err != nil || loader.OrderOf(part) != want {
			t.Errorf("%s: a split part has order %v (%v)", spec, loader.OrderOf(part), err)
		}
		src.Close()
	}
	for _, spec := range []string{"synthetic:100?order=shards", "synthetic:100?order=bogus", "synthetic:100?order="} {
		if src, err := loader.Open(spec); err == nil || !strings.Contains(err.Error(), "order") {
			t.Errorf("%s: opened (%v), want an unknown option error", spec, err)
			if src != nil {
				src.Close()
			}
		}
	}
}
