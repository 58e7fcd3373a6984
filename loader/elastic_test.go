package loader_test

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/format/synthetic"
	"github.com/loaderd/loaderd/sampler"
)

// TestElasticResume checkpoints epoch 1 of a world of W ranks after k
// batches each and finishes it with W′ ranks from the global position, for
// 4→2, 2→3, 3→1 and 1→4 and several k. Over the epoch the delivered
// indices are the epoch's multiset (every index once, plus the padding of
// the last world: the first entries of the epoch's order), and every
// sample's label, augmentation parameters and bytes equal those of an
// uninterrupted one-rank run. The next epoch is an ordinary W′ run's.
func TestElasticResume(t *testing.T) {
	const n, bs, epoch = 101, 4, 1
	src := synthetic.New(n, 0)
	pool := loader.NewPool(2)
	defer pool.Close()
	ref := map[int64]got{} // per index, from one uninterrupted rank
	for _, g := range drain(t, newTestLoader(t, pool, src, func(c *loader.Config) {
		c.Start, c.Epochs, c.BatchSize = sampler.Position{Epoch: epoch}, epoch+1, 8
	}), 0) {
		for k, i := range g.indices {
			ref[i] = got{labels: g.labels[k : k+1], params: g.params[k : k+1], data: g.data[k*len(g.data)/len(g.indices) : (k+1)*len(g.data)/len(g.indices)]}
		}
	}
	if len(ref) != n {
		t.Fatalf("reference covers %d indices", len(ref))
	}
	order := sampler.NewPerm(n, sampler.EpochKey(42, epoch))
	for _, tr := range [][2]int{{4, 2}, {2, 3}, {3, 1}, {1, 4}} {
		w, w2 := tr[0], tr[1]
		per := sampler.Distributed{N: n, World: w}.BatchesFrom(0, bs, false)
		for _, k := range []int64{1, per / 2, per - 1} {
			t.Run(fmt.Sprintf("%d->%d/k=%d", w, w2, k), func(t *testing.T) {
				var delivered []got
				run := func(world int, start sampler.Position, max int, epochs int64) {
					for r := range world {
						l := newTestLoader(t, pool, src, func(c *loader.Config) {
							c.Rank, c.World, c.BatchSize, c.Start, c.Epochs = r, world, bs, start, epochs
						})
						delivered = append(delivered, drain(t, l, max)...)
						l.Close()
					}
				}
				run(w, sampler.Position{Epoch: epoch}, int(k), epoch+1)
				g, err := sampler.Distributed{N: n, World: w}.Global(sampler.Position{Epoch: epoch, Batch: k}, bs, false)
				if err != nil || g.Epoch != epoch || g.Offset != k*bs*int64(w) {
					t.Fatalf("global position %v, %v", g, err)
				}
				before := len(delivered)
				run(w2, g, 0, epoch+1)
				for _, b := range delivered[before:] {
					if b.epoch != epoch {
						t.Fatalf("resumed stream delivered epoch %d", b.epoch)
					}
				}
				// The epoch's multiset: each index once, then the padding.
				rest := n - g.Offset
				pad := (rest+int64(w2)-1)/int64(w2)*int64(w2) - rest
				var want, all []int64
				for i := range int64(n) {
					want = append(want, i)
				}
				for j := range pad {
					want = append(want, order.At(j%n))
				}
				for _, b := range delivered {
					sz := len(b.data) / len(b.indices)
					for k, i := range b.indices {
						all = append(all, i)
						r := ref[i]
						if b.labels[k] != r.labels[0] || b.params[k] != r.params[0] || !bytes.Equal(b.data[k*sz:(k+1)*sz], r.data) {
							t.Fatalf("index %d: label %d params %+v, uninterrupted %d %+v (or bytes differ)",
								i, b.labels[k], b.params[k], r.labels[0], r.params[0])
						}
					}
				}
				slices.Sort(all)
				slices.Sort(want)
				if !slices.Equal(all, want) {
					t.Fatalf("delivered %d indices %v\nwant %d %v", len(all), all, len(want), want)
				}
			})
		}
	}
	// After the resumed epoch, an ordinary W′ run.
	start := sampler.Position{Epoch: epoch, Offset: 44}
	resumed := drain(t, newTestLoader(t, pool, src, func(c *loader.Config) {
		c.Rank, c.World, c.BatchSize, c.Start, c.Epochs = 1, 3, bs, start, epoch+2
	}), 0)
	ordinary := drain(t, newTestLoader(t, pool, src, func(c *loader.Config) {
		c.Rank, c.World, c.BatchSize, c.Start, c.Epochs = 1, 3, bs, sampler.Position{Epoch: epoch + 1}, epoch+2
	}), 0)
	first := sampler.Distributed{N: n, World: 3}.BatchesFrom(44, bs, false)
	if int64(len(resumed)) != first+int64(len(ordinary)) {
		t.Fatalf("%d batches resumed, want %d + %d", len(resumed), first, len(ordinary))
	}
	for i := range ordinary { // seq numbers differ; content and position must not
		ordinary[i].seq = resumed[first+int64(i)].seq
	}
	sameBatches(t, resumed[first:], ordinary)
}

// TestElasticStartEdges: an offset at N starts the next epoch; past N, or
// a start batch past the rest's batches, is refused.
func TestElasticStartEdges(t *testing.T) {
	src := synthetic.New(10, 0)
	pool := loader.NewPool(1)
	defer pool.Close()
	b := drain(t, newTestLoader(t, pool, src, func(c *loader.Config) {
		c.World, c.BatchSize, c.Start = 2, 2, sampler.Position{Epoch: 0, Offset: 10}
	}), 1)
	if len(b) != 1 || b[0].epoch != 1 || b[0].index != 0 {
		t.Fatalf("offset N: first batch %+v", b)
	}
	b = drain(t, newTestLoader(t, pool, src, func(c *loader.Config) {
		c.World, c.BatchSize, c.Start = 2, 1, sampler.Position{Epoch: 0, Batch: 1, Offset: 6}
	}), 0)
	// The rest is order[6:10], two per rank; rank 0's second is order[8].
	if len(b) != 1+2*5 || b[0].epoch != 0 || b[0].index != 1 || !slices.Equal(b[0].indices, []int64{sampler.NewPerm(10, sampler.EpochKey(42, 0)).At(8)}) {
		t.Fatalf("offset 6, batch 1: %d batches, first %+v", len(b), b[0])
	}
	pipe := testPipeline(t, src)
	for _, start := range []sampler.Position{{Offset: 11}, {Offset: 6, Batch: 1}, {Offset: -1}} {
		_, err := loader.New(pool, loader.Config{Source: src, Pipeline: pipe, World: 2, BatchSize: 2, Start: start})
		if err == nil {
			t.Errorf("start %v accepted", start)
		}
	}
}
