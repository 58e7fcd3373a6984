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

// TestHoldUntilWiden: a loader opened with HoldUntilWiden reads nothing
// until Widen (a stream dropped at once costs nothing), then makes its
// whole window, which a client may hold unreleased.
func TestHoldUntilWiden(t *testing.T) {
	for _, hold := range []bool{false, true} {
		src := &countingSource{Source: synthetic.New(256, 0)}
		pool := loader.NewPool(2)
		defer pool.Close()
		l := newTestLoader(t, pool, src, func(c *loader.Config) { c.InFlight, c.HoldUntilWiden = 4, hold })
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if hold {
			// Nothing is planned: no wait makes the count grow (a loaded
			// machine can only hide a fault here, never invent one).
			time.Sleep(50 * time.Millisecond)
			if n := src.n.Load(); n != 0 {
				t.Fatalf("held: %d samples read before Widen, want none", n)
			}
			l.Widen()
			l.Widen() // again: no effect
		}
		// The whole window, held at once.
		for k := range 4 {
			b, err := l.Next(ctx)
			if err != nil {
				t.Fatalf("hold %v: batch %d of the window: %v", hold, k, err)
			}
			defer b.Release()
		}
		if n := src.n.Load(); n != 28 {
			t.Fatalf("hold %v: %d samples read for 4 batches of 7", hold, n)
		}
	}
}
