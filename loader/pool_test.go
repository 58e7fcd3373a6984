package loader_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/format/synthetic"
)

// recordingSource wraps a source, logs which stream asked for each sample,
// and holds every call until gate closes; started is closed on the first.
type recordingSource struct {
	loader.Source
	name    string
	log     *[]string
	mu      *sync.Mutex
	gate    chan struct{}
	started chan struct{}
	once    sync.Once
}

func (r *recordingSource) Sample(i int64, scratch []byte) (int32, []byte, error) {
	r.once.Do(func() { close(r.started) })
	<-r.gate
	r.mu.Lock()
	*r.log = append(*r.log, r.name)
	r.mu.Unlock()
	return r.Source.Sample(i, scratch)
}

// TestPoolRoundRobin: with one worker, a second stream's work is taken
// in turn with the first's queue, not after it.
func TestPoolRoundRobin(t *testing.T) {
	var log []string
	var mu sync.Mutex
	gate := make(chan struct{})
	base := synthetic.New(1000, 0)
	src := func(name string) *recordingSource {
		return &recordingSource{Source: base, name: name, log: &log, mu: &mu, gate: gate, started: make(chan struct{})}
	}
	pool := loader.NewPool(1)
	defer pool.Close()
	cfg := func(c *loader.Config) { c.BatchSize, c.InFlight, c.WithParams = loader.ChunkSize, 4, false }
	// Hold the only worker on a third stream's batch, so the two under
	// test are both fully queued before it takes anything.
	held := src("held")
	lh := newTestLoader(t, pool, held, func(c *loader.Config) { c.BatchSize, c.InFlight = loader.ChunkSize, 1 })
	loader.Plan(lh)
	<-held.started
	la := newTestLoader(t, pool, src("a"), cfg)
	lb := newTestLoader(t, pool, src("b"), cfg)
	loader.Plan(la)
	loader.Plan(lb)
	close(gate)
	// Closed, not read: a released batch would let it plan another, which
	// the worker may take before the Close lands. Its running chunk
	// finishes; nothing of it is queued after.
	lh.Close()
	for _, l := range []*loader.Loader{la, lb} {
		for range 4 {
			bt, err := l.Next(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			bt.Release()
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// One chunk is one batch here; chunks alternate between the streams.
	var order []string
	for i := loader.ChunkSize; i < 9*loader.ChunkSize; i += loader.ChunkSize {
		order = append(order, log[i])
	}
	want := []string{"a", "b", "a", "b", "a", "b", "a", "b"}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("chunk order %v, want %v", order, want)
		}
	}
}

// stuckSource is a source whose reads block until release closes, as a
// read from a dead network file system would; entered closes on the first.
type stuckSource struct {
	loader.Source
	entered, release chan struct{}
	once             sync.Once
}

func (s *stuckSource) Sample(i int64, scratch []byte) (int32, []byte, error) {
	s.once.Do(func() { close(s.entered) })
	<-s.release
	return s.Source.Sample(i, scratch)
}

// TestCloseContextStuckWorker: CloseContext returns at its deadline,
// saying so, while a worker is stuck in a read (Close would wait for it
// for good); once the read returns, the workers stop.
func TestCloseContextStuckWorker(t *testing.T) {
	pool := loader.NewPool(2)
	src := &stuckSource{Source: synthetic.New(64, 1), entered: make(chan struct{}), release: make(chan struct{})}
	l := newTestLoader(t, pool, src, nil)
	var release sync.Once
	t.Cleanup(func() { release.Do(func() { close(src.release) }) }) // before l.Close, which waits for the read
	loader.Plan(l)
	select {
	case <-src.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("no worker read a sample")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- pool.CloseContext(ctx) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("CloseContext = %v, want a deadline error", err)
		}
		t.Logf("CloseContext returned after %v: %v", time.Since(start).Round(time.Millisecond), err)
	case <-time.After(5 * time.Second):
		t.Fatal("CloseContext is still waiting for a stuck worker 5 s after its 200 ms deadline")
	}
	release.Do(func() { close(src.release) })
	if err := pool.CloseContext(context.Background()); err != nil {
		t.Fatalf("after the read returned: %v", err)
	}
}
