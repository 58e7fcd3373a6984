package loader

import (
	"context"
	"sync"
	"testing"
)

// recordingSource wraps a source, logs which stream asked for each sample,
// and holds the first call until gate closes.
type recordingSource struct {
	Source
	name string
	log  *[]string
	mu   *sync.Mutex
	gate chan struct{}
}

func (r *recordingSource) Sample(i int64, scratch []byte) (int32, []byte, error) {
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
	base := NewSynthetic(1000, 0)
	a := &recordingSource{base, "a", &log, &mu, gate}
	b := &recordingSource{base, "b", &log, &mu, gate}
	pool := NewPool(1)
	defer pool.Close()
	cfg := func(c *Config) { c.BatchSize, c.InFlight, c.WithParams = chunkSize, 4, false }
	la := newTestLoader(t, pool, a, cfg)
	lb := newTestLoader(t, pool, b, cfg)
	// Queue a's four batches, then b's four, while the worker is held.
	for _, l := range []*Loader{la, lb} {
		l.mu.Lock()
		l.planLocked()
		l.mu.Unlock()
	}
	close(gate)
	for _, l := range []*Loader{la, lb} {
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
	for i := 0; i < 8*chunkSize; i += chunkSize {
		order = append(order, log[i])
	}
	want := []string{"a", "b", "a", "b", "a", "b", "a", "b"}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("chunk order %v, want %v", order, want)
		}
	}
}
