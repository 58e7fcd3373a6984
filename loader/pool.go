package loader

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// chunkSize is how many samples a worker takes at once: large enough that
// the scheduler's lock is noise, small enough that a batch of 256 spreads
// over every worker.
const chunkSize = 16

// Pool is the set of worker goroutines (PyTorch's num_workers) shared by
// every Loader built on it. Workers take chunks of queued batches
// round-robin across tenants (Config.Tenant: the daemon's clients), then
// across a tenant's loaders, so neither one busy stream nor a client
// with many streams can starve another; each Loader bounds its own
// batches in flight. SetActive parks the
// workers above a count (--workers auto), and Busy sums the time workers
// spent on chunks. A Pool is safe for concurrent use.
type Pool struct {
	mu       sync.Mutex
	cond     sync.Cond       // queued work, or Close
	parked   sync.Cond       // workers at or above limit wait here for SetActive
	tenants  []*tenant       // tenants with queued chunks, in round-robin order (tenant.go)
	byTenant map[any]*tenant // the same, by Config.Tenant
	rr       int
	closed   bool
	done     chan struct{}
	wg       sync.WaitGroup
	workers  int
	limit    int // workers with id < limit take chunks

	t0      time.Time     // the clock busy time is read on (monotonic)
	states  []workerState // per worker: the start of its chunk in progress
	busyNs  atomic.Int64  // finished chunks' time
	busyMax atomic.Int64  // the largest Busy returned, so it never goes back

	stopOnce sync.Once
	stopped  chan struct{} // closed once every worker has returned
}

// NewPool starts workers goroutines (at least one), all active.
func NewPool(workers int) *Pool {
	workers = max(workers, 1)
	p := &Pool{done: make(chan struct{}), stopped: make(chan struct{}), workers: workers, limit: workers,
		t0: time.Now(), states: make([]workerState, workers), byTenant: map[any]*tenant{}}
	p.cond.L = &p.mu
	p.parked.L = &p.mu
	p.wg.Add(workers)
	for id := range workers {
		go p.work(id)
	}
	return p
}

// Workers returns the number of worker goroutines, active or parked.
func (p *Pool) Workers() int { return p.workers }

// Active returns the number of workers taking chunks.
func (p *Pool) Active() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.limit
}

// SetActive lets n workers take chunks (clamped to 1..Workers) and parks
// the rest once their current chunk is done; it returns the count set.
// Parked workers keep their buffers, so growing again costs nothing.
// Output does not change: it never depends on the number of workers.
func (p *Pool) SetActive(n int) int {
	n = min(max(n, 1), p.workers)
	p.mu.Lock()
	grow := n > p.limit
	p.limit = n
	p.mu.Unlock()
	if grow {
		p.parked.Broadcast()
	}
	return n
}

// Close stops the workers once their current chunks are done. Loaders
// still waiting on the pool get ErrClosed.
func (p *Pool) Close() { p.CloseContext(context.Background()) }

// CloseContext is Close with a deadline: it stops the workers and waits
// for their current chunks until ctx is done. A worker can be stuck in a
// read that never returns (a hung network file system): past ctx it is
// left running, and CloseContext returns an error saying so. Then the
// caller must not close the sources or unmap slots the stuck workers may
// still touch; a daemon shutting down leaves them to the process's exit.
func (p *Pool) CloseContext(ctx context.Context) error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.done)
		p.cond.Broadcast()
		p.parked.Broadcast()
	}
	p.mu.Unlock()
	p.stopOnce.Do(func() {
		go func() {
			p.wg.Wait()
			close(p.stopped)
		}()
	})
	select {
	case <-p.stopped:
		return nil
	default:
	}
	select {
	case <-p.stopped:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("loader: worker pool: %w; workers still busy (stuck in a read?)", ctx.Err())
	}
}

type chunk struct {
	b      *Batch
	lo, hi int
}

func (p *Pool) work(id int) {
	defer p.wg.Done()
	// A fault reading a file mapping (the file shrank) panics instead of
	// killing the process; fill recovers it (see fault.go).
	debug.SetPanicOnFault(true)
	wk := &worker{pool: p, state: &p.states[id]}
	for {
		c, ok := p.take(id)
		if !ok {
			return
		}
		wk.sized = sizedReader{} // a worker serves many streams
		wk.chunkStart()
		c.b.l.fill(c, wk)
		// With every P running a worker, the goroutine a finished batch
		// wakes (the stream's sender) waits in this P's run queue until
		// the worker blocks, which it does only once the window is full:
		// the batch leaves late and the window drains in bursts. Yielding
		// between chunks (~70 µs of CIFAR, a fraction of a µs to yield)
		// lets it run at once: shm streams went from 86% to 88–94% of the
		// in-process rate (BenchmarkE2E/share=shm).
		runtime.Gosched()
	}
}

// take blocks until a chunk is queued, choosing loaders in turn. Worker
// id parks while it is not among the active ones.
func (p *Pool) take(id int) (chunk, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		if p.closed {
			return chunk{}, false
		}
		if id >= p.limit {
			p.parked.Wait()
			continue
		}
		if l, ok := p.nextLocked(); ok {
			c := l.nextChunkLocked()
			l.busy.Add(1)
			if l.qlen == 0 {
				p.deactivateLocked(l)
			}
			return c, true
		}
		p.cond.Wait()
	}
}

// submit queues every sample of b for the workers.
func (p *Pool) submit(b *Batch) {
	l := b.l
	p.mu.Lock()
	l.queue[(l.qhead+l.qlen)%len(l.queue)] = b
	l.qlen++
	p.activateLocked(l)
	p.mu.Unlock()
	p.cond.Broadcast()
}

// withdraw drops l's queued chunks; chunks already taken still finish.
func (p *Pool) withdraw(l *Loader) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.deactivateLocked(l)
	l.qhead, l.qlen = 0, 0
}
