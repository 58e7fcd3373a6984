package trainer_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/loaderd/loaderd/client"
	"github.com/loaderd/loaderd/sampler"
	"github.com/loaderd/loaderd/trainer"
)

// seen records what the ranks trained on: per epoch, each sample's bytes
// under its dataset index, as often as it came.
type seen struct {
	mu sync.Mutex
	by map[int64]map[int64][][]byte // epoch → index → copies
}

func (s *seen) hook(_ int, b *client.Batch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by[b.Epoch] == nil {
		s.by[b.Epoch] = map[int64][][]byte{}
	}
	sz := len(b.Data) / len(b.Indices)
	for k, i := range b.Indices {
		s.by[b.Epoch][i] = append(s.by[b.Epoch][i], bytes.Clone(b.Data[k*sz:(k+1)*sz]))
	}
}

func elasticConfig(world int, ckpt string) trainer.TrainConfig {
	cfg := trainer.TrainConfig{Dataset: "train", Model: "cnn", CNN: tinyCNN, Mode: "ddp", Devices: world,
		Goroutines: 1, Batch: 12, Epochs: 2, LR: 0.1, Momentum: 0.9, Seed: 3, Checkpoint: ckpt,
		Augment: "crop=32:4,flip=0.5,normalize=cifar10,out=f32:chw"}
	cfg.EnsureDefaults()
	return cfg
}

// wantEpoch is the multiset of indices an epoch of n trains on when a world
// of w ranks takes its order's first g entries and w2 ranks the rest, by
// docs/RESUME.md: the rest order[(g+j) mod n], j < ⌈(n-g)/w2⌉·w2, each
// rank's share cut to whole batches of 12/w2 (the trainer drops the short
// batch), and how many steps the rest takes.
func wantEpoch(n, g int64, w2 int, seed uint64, e int64) (map[int64]int, int64) {
	order := sampler.NewPerm(n, sampler.EpochKey(seed, e))
	out := map[int64]int{}
	for j := range g {
		out[order.At(j)]++
	}
	w, b := int64(w2), int64(12/w2)
	per := (n - g + w - 1) / w
	steps := per / b
	for j := range steps * b * w {
		out[order.At((g+j)%n)]++
	}
	return out, steps
}

// TestElasticResume stops a ddp run of W ranks after k steps (global batch
// 12, n = 95: padding, and a short batch dropped) and resumes its
// checkpoint with W′ ranks, for 4→2, 2→3, 3→1 and 1→4 and several k. The
// checkpoint holds the global position; each epoch trains on the multiset
// docs/RESUME.md defines, the resumed one and the ordinary W′ one after
// it; every sample's bytes — so its crop and flip — are an uninterrupted
// run's.
func TestElasticResume(t *testing.T) {
	const n = 95
	c := startDaemon(t, n, 16)
	ref := &seen{by: map[int64]map[int64][][]byte{}}
	undo := trainer.SetBatchHook(ref.hook)
	res, err := trainer.Train(context.Background(), c, elasticConfig(2, ""))
	undo()
	if err != nil || !res.Done || res.Steps != 16 || len(ref.by[0]) != n || len(ref.by[1]) != n {
		t.Fatalf("uninterrupted run: %+v, %v", res, err)
	}
	stops := map[[2]int][]int64{{4, 2}: {1, 5}, {2, 3}: {3, 7}, {3, 1}: {2, 6}, {1, 4}: {4}}
	if raceEnabled {
		stops = map[[2]int][]int64{{4, 2}: {5}, {2, 3}: {3}, {3, 1}: {2}, {1, 4}: {4}}
	}
	for _, tr := range [][2]int{{4, 2}, {2, 3}, {3, 1}, {1, 4}} {
		for _, k := range stops[tr] {
			t.Run(fmt.Sprintf("%d->%d/k=%d", tr[0], tr[1], k), func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "ckpt")
				got := &seen{by: map[int64]map[int64][][]byte{}}
				defer trainer.SetBatchHook(got.hook)()
				cfg := elasticConfig(tr[0], path)
				cfg.MaxSteps = k
				if res, err := trainer.Train(context.Background(), c, cfg); err != nil || res.Steps != k {
					t.Fatalf("first part: %+v, %v", res, err)
				}
				ck, err := trainer.ReadCheckpoint(path)
				if err != nil {
					t.Fatal(err)
				}
				per := int64(12 / tr[0])
				if want := (sampler.Position{Offset: k * 12}); ck.Meta.Global == nil || *ck.Meta.Global != want ||
					ck.Meta.Position != (sampler.Position{Batch: k}) || ck.Meta.Fingerprint.World != tr[0] {
					t.Fatalf("checkpoint at %v (global %v, world %d), want batch %d = offset %d (%d per rank)",
						ck.Meta.Position, ck.Meta.Global, ck.Meta.Fingerprint.World, k, want.Offset, per)
				}
				want0, rest := wantEpoch(n, k*12, tr[1], 3, 0)
				want1, whole := wantEpoch(n, 0, tr[1], 3, 1)
				res, err := trainer.Train(context.Background(), c, elasticConfig(tr[1], path))
				if err != nil || !res.Done || res.Steps != k+rest+whole || res.Start != *ck.Meta.Global {
					t.Fatalf("resumed run: %+v, %v; want %d+%d+%d steps", res, err, k, rest, whole)
				}
				for e, want := range []map[int64]int{want0, want1} {
					if len(got.by[int64(e)]) != len(want) {
						t.Fatalf("epoch %d: %d distinct indices, want %d", e, len(got.by[int64(e)]), len(want))
					}
					for i, copies := range got.by[int64(e)] {
						if len(copies) != want[i] {
							t.Fatalf("epoch %d: index %d trained on %d times, want %d", e, i, len(copies), want[i])
						}
						for _, c := range copies {
							if !bytes.Equal(c, ref.by[int64(e)][i][0]) {
								t.Fatalf("epoch %d: index %d's augmented bytes differ from the uninterrupted run's", e, i)
							}
						}
					}
				}
			})
		}
	}
}
