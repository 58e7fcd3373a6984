package loader_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/format/synthetic"
)

// countingSource counts the samples read.
type countingSource struct {
	loader.Source
	n atomic.Int64
}

func (s *countingSource) Sample(i int64, scratch []byte) (int32, []byte, error) {
	s.n.Add(1)
	return s.Source.Sample(i, scratch)
}

// TestOneOnCredit: a loader opened with OneOnCredit makes one batch until
// Widen (a stream dropped at once costs one batch), then its whole window,
// which a client may hold unreleased.
func TestOneOnCredit(t *testing.T) {
	for _, credit := range []bool{false, true} {
		src := &countingSource{Source: synthetic.New(256, 0)}
		pool := loader.NewPool(2)
		defer pool.Close()
		l := newTestLoader(t, pool, src, func(c *loader.Config) { c.InFlight, c.OneOnCredit = 4, credit })
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		first, err := l.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer first.Release()
		if credit {
			// Nothing else is planned: no wait makes the count grow (a
			// loaded machine can only hide a fault here, never invent one).
			time.Sleep(50 * time.Millisecond)
			if n := src.n.Load(); n != 7 {
				t.Fatalf("on credit: %d samples read before Widen, want one batch of 7", n)
			}
			l.Widen()
			l.Widen() // again: no effect
		}
		// The rest of the window, all held at once.
		for k := 1; k < 4; k++ {
			b, err := l.Next(ctx)
			if err != nil {
				t.Fatalf("credit %v: batch %d of the window: %v", credit, k, err)
			}
			defer b.Release()
		}
		if n := src.n.Load(); n != 28 {
			t.Fatalf("credit %v: %d samples read for 4 batches of 7", credit, n)
		}
	}
}
