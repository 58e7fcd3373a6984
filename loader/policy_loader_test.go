package loader_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"

	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/format/synthetic"
)

// TestLoaderErrorPolicy: with FailOnError a corrupt sample fails the
// stream; with SkipOnError batches keep their size, name the substitutes
// in Indices, count and report each skip, and stay identical whatever the
// number of workers.
func TestLoaderErrorPolicy(t *testing.T) {
	src := flaky{synthetic.New(100, 1), map[int64]bool{5: true, 6: true, 42: true, 99: true}}
	pool := loader.NewPool(2)
	defer pool.Close()
	l := newTestLoader(t, pool, src, func(c *loader.Config) { c.Epochs = 1 })
	var err error
	for err == nil {
		var b *loader.Batch
		if b, err = l.Next(context.Background()); err == nil {
			b.Release()
		}
	}
	var se *loader.SampleError
	if !errors.As(err, &se) || !errors.Is(err, loader.ErrCorrupt) || !src.bad[se.Index] {
		t.Fatalf("fail policy: %v, want a SampleError wrapping ErrCorrupt", err)
	}

	run := func(workers int) ([]got, int64, []loader.SkipEvent) {
		pool := loader.NewPool(workers)
		defer pool.Close()
		var mu sync.Mutex
		var events []loader.SkipEvent
		l := newTestLoader(t, pool, src, func(c *loader.Config) {
			c.Epochs, c.OnError = 2, loader.SkipOnError
			c.OnSkip = func(e loader.SkipEvent) { mu.Lock(); events = append(events, e); mu.Unlock() }
		})
		out := drain(t, l, 0)
		if _, err := l.Next(context.Background()); err != io.EOF {
			t.Fatalf("after the last epoch: %v", err)
		}
		return out, l.Skipped(), events
	}
	one, skipped, events := run(1)
	four, _, _ := run(4)
	sameBatches(t, one, four)
	if skipped != 8 || len(events) != 8 {
		t.Fatalf("skipped %d with %d events, want 8 (4 bad samples, 2 epochs)", skipped, len(events))
	}
	var seen []int64
	for _, b := range one {
		if len(b.indices) != 7 && b.index != 14 {
			t.Fatalf("batch %d has %d samples", b.index, len(b.indices))
		}
		for _, i := range b.indices {
			if src.bad[i] {
				t.Fatalf("batch %d delivers bad sample %d", b.index, i)
			}
			if b.epoch == 0 {
				seen = append(seen, i)
			}
		}
	}
	slices.Sort(seen)
	if n := len(slices.Compact(slices.Clone(seen))); n != 96 {
		t.Fatalf("epoch 0 covers %d distinct samples, want 96", n)
	}
	// 5 and 6 are replaced by 7, 42 by 43, 99 wraps to 0.
	for _, want := range [][2]int64{{7, 3}, {43, 2}, {0, 2}} {
		c := int64(0)
		for _, i := range seen {
			if i == want[0] {
				c++
			}
		}
		if c != want[1] {
			t.Fatalf("sample %d delivered %d times in epoch 0, want %d", want[0], c, want[1])
		}
	}

	pool2 := loader.NewPool(2)
	defer pool2.Close()
	lb := newTestLoader(t, pool2, src, func(c *loader.Config) { c.Epochs, c.OnError, c.MaxSkips = 1, loader.SkipOnError, 3 })
	for err = nil; err == nil; {
		var b *loader.Batch
		if b, err = lb.Next(context.Background()); err == nil {
			b.Release()
		}
	}
	if !errors.Is(err, loader.ErrTooManySkips) {
		t.Fatalf("over MaxSkips: %v, want ErrTooManySkips", err)
	}
}
