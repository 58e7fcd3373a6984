package loader_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/format/synthetic"
)

// concurrencySource sleeps in every read and records the most reads in
// progress at once: the number of workers actually taking chunks.
type concurrencySource struct {
	loader.Source
	sleep     time.Duration
	now, peak atomic.Int32
}

func (s *concurrencySource) Sample(i int64, scratch []byte) (int32, []byte, error) {
	n := s.now.Add(1)
	for {
		p := s.peak.Load()
		if n <= p || s.peak.CompareAndSwap(p, n) {
			break
		}
	}
	time.Sleep(s.sleep)
	s.now.Add(-1)
	return s.Source.Sample(i, scratch)
}

// TestPoolSetActive: SetActive bounds the workers taking chunks, clamped
// to 1..Workers, growing and shrinking one pool in turn; the batches are
// the same whatever the count.
func TestPoolSetActive(t *testing.T) {
	pool := loader.NewPool(4)
	defer pool.Close()
	base := synthetic.New(1024, 0)
	var ref []got
	for _, tc := range []struct{ set, want int }{
		{4, 4}, {1, 1}, {2, 2}, {9, 4}, {0, 1}, {3, 3},
	} {
		if got := pool.SetActive(tc.set); got != tc.want {
			t.Fatalf("SetActive(%d) = %d, want %d", tc.set, got, tc.want)
		}
		if got := pool.Active(); got != tc.want {
			t.Fatalf("after SetActive(%d): Active() = %d, want %d", tc.set, got, tc.want)
		}
		src := &concurrencySource{Source: base, sleep: 500 * time.Microsecond}
		// 4 batches of 4 chunks queued at once: work for every worker.
		l := newTestLoader(t, pool, src, func(c *loader.Config) {
			c.BatchSize, c.InFlight, c.Epochs, c.WithParams = 4*loader.ChunkSize, 4, 1, false
		})
		out := drain(t, l, 4)
		l.Close()
		if p := int(src.peak.Load()); p != tc.want {
			t.Errorf("SetActive(%d): %d workers read at once, want %d", tc.set, p, tc.want)
		}
		if ref == nil {
			ref = out
		} else {
			sameBatches(t, ref, out) // output never depends on the worker count
		}
	}
}

// TestPoolBusy: a batch's busy time is at least what its reads slept,
// summed over its chunks; the pool's counts a chunk still in progress
// and never goes back.
func TestPoolBusy(t *testing.T) {
	pool := loader.NewPool(2)
	defer pool.Close()
	const sleep = time.Millisecond
	src := &concurrencySource{Source: synthetic.New(256, 0), sleep: sleep}
	l := newTestLoader(t, pool, src, func(c *loader.Config) { c.BatchSize, c.InFlight = 2*loader.ChunkSize, 1 })
	start := time.Now()
	b, err := l.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	wall := time.Since(start)
	if min := time.Duration(b.Len()) * sleep; b.Busy() < min || b.Busy() > 2*wall {
		t.Errorf("batch busy %v, want at least %v (its reads' sleep) and at most 2 × %v (2 workers' wall time)", b.Busy(), min, wall)
	}
	if pb := pool.Busy(); pb < b.Busy() {
		t.Errorf("pool busy %v < the batch's %v", pb, b.Busy())
	}
	b.Release()
	l.Close()

	// A chunk in progress counts: hold a read and watch the pool's time grow.
	stuck := &stuckSource{Source: synthetic.New(64, 1), entered: make(chan struct{}), release: make(chan struct{})}
	ls := newTestLoader(t, pool, stuck, func(c *loader.Config) { c.BatchSize, c.InFlight = loader.ChunkSize, 1 })
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(stuck.release) }) })
	loader.Plan(ls)
	<-stuck.entered
	before := pool.Busy()
	time.Sleep(50 * time.Millisecond)
	mid := pool.Busy()
	if mid-before < 40*time.Millisecond {
		t.Errorf("pool busy grew by %v over 50 ms of a read in progress", mid-before)
	}
	once.Do(func() { close(stuck.release) })
	prev := mid
	for range 1000 {
		if got := pool.Busy(); got < prev {
			t.Fatalf("pool busy went back from %v to %v", prev, got)
		} else {
			prev = got
		}
	}
}
