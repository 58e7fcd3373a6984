package loader_test

import (
	"context"
	"sync"
	"testing"

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
	if bt, err := lh.Next(context.Background()); err != nil {
		t.Fatal(err)
	} else {
		bt.Release()
	}
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
