package loader_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/format/synthetic"
	"github.com/loaderd/loaderd/sampler"
)

// TestOnDemand: batches wanted by number, in any order and in pieces, are
// byte for byte the batches an ordinary stream delivers at those numbers,
// from a plain start and from an elastic one.
func TestOnDemand(t *testing.T) {
	src := synthetic.New(100, 0)
	pool := loader.NewPool(3)
	defer pool.Close()
	for _, start := range []sampler.Position{{}, {Epoch: 1, Batch: 4}, {Epoch: 0, Batch: 2, Offset: 37}} {
		mod := func(c *loader.Config) { c.Start = start }
		all := drain(t, newTestLoader(t, pool, src, mod), 0)
		l := newTestLoader(t, pool, src, func(c *loader.Config) { mod(c); c.OnDemand = true })
		if n := l.Numbering().Len(); n != int64(len(all)) {
			t.Fatalf("start %v: Numbering().Len() = %d, the stream has %d", start, n, len(all))
		}
		order := rand.New(rand.NewPCG(1, 2)).Perm(len(all))
		var out []got
		for len(order) > 0 {
			k := min(len(order), 3) // a client wants a few at a time, within its window
			for _, n := range order[:k] {
				if err := l.Want(int64(n)); err != nil {
					t.Fatal(err)
				}
			}
			out = append(out, drain(t, l, k)...)
			for i, g := range out[len(out)-k:] {
				if g.seq != int64(order[i]) {
					t.Fatalf("start %v: wanted %d, got seq %d", start, order[i], g.seq)
				}
			}
			order = order[k:]
		}
		want := make([]got, len(out))
		for i, g := range out {
			want[i] = all[g.seq]
		}
		sameBatches(t, want, out)
		if err := l.Want(int64(len(all))); err == nil {
			t.Fatalf("start %v: Want past the end succeeded", start)
		}
	}
}

// TestOnDemandWaits: an on-demand stream with nothing wanted waits rather
// than ending, and a plain stream refuses Want.
func TestOnDemandWaits(t *testing.T) {
	src := synthetic.New(20, 0)
	pool := loader.NewPool(1)
	defer pool.Close()
	l := newTestLoader(t, pool, src, func(c *loader.Config) { c.OnDemand = true })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Next(ctx); err != context.Canceled {
		t.Fatalf("Next with nothing wanted: %v, want it to wait until cancelled", err)
	}
	plain := newTestLoader(t, pool, src, nil)
	if err := plain.Want(0); err == nil {
		t.Fatal("Want on a plain stream succeeded")
	}
}
