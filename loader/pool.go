package loader

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
)

// chunkSize is how many samples a worker takes at once: large enough that
// the scheduler's lock is noise, small enough that a batch of 256 spreads
// over every worker.
const chunkSize = 16

// Pool is the set of worker goroutines (PyTorch's num_workers) shared by
// every Loader built on it. Workers take chunks of queued batches
// round-robin across loaders, so one busy stream cannot starve another;
// each Loader bounds its own batches in flight. A Pool is safe for
// concurrent use.
type Pool struct {
	mu      sync.Mutex
	cond    sync.Cond
	active  []*Loader // loaders with queued chunks, in round-robin order
	rr      int
	closed  bool
	done    chan struct{}
	wg      sync.WaitGroup
	workers int

	stopOnce sync.Once
	stopped  chan struct{} // closed once every worker has returned
}

// NewPool starts workers goroutines (at least one).
func NewPool(workers int) *Pool {
	workers = max(workers, 1)
	p := &Pool{done: make(chan struct{}), stopped: make(chan struct{}), workers: workers}
	p.cond.L = &p.mu
	p.wg.Add(workers)
	for range workers {
		go p.work()
	}
	return p
}

// Workers returns the number of worker goroutines.
func (p *Pool) Workers() int { return p.workers }

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

func (p *Pool) work() {
	defer p.wg.Done()
	// A fault reading a file mapping (the file shrank) panics instead of
	// killing the process; fill recovers it (see fault.go).
	debug.SetPanicOnFault(true)
	wk := new(worker)
	for {
		c, ok := p.take()
		if !ok {
			return
		}
		wk.sized = sizedReader{} // a worker serves many streams
		c.b.l.fill(c, wk)
	}
}

// take blocks until a chunk is queued, choosing loaders in turn.
func (p *Pool) take() (chunk, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		if p.closed {
			return chunk{}, false
		}
		if len(p.active) > 0 {
			if p.rr >= len(p.active) {
				p.rr = 0
			}
			l := p.active[p.rr]
			c := l.nextChunkLocked()
			l.busy.Add(1)
			if l.qlen == 0 {
				p.removeLocked(p.rr)
			} else {
				p.rr++
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
	if !l.active {
		l.active = true
		p.active = append(p.active, l)
	}
	p.mu.Unlock()
	p.cond.Broadcast()
}

// withdraw drops l's queued chunks; chunks already taken still finish.
func (p *Pool) withdraw(l *Loader) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, a := range p.active {
		if a == l {
			p.removeLocked(i)
			break
		}
	}
	l.qhead, l.qlen = 0, 0
}

func (p *Pool) removeLocked(i int) {
	p.active[i].active = false
	copy(p.active[i:], p.active[i+1:])
	p.active[len(p.active)-1] = nil
	p.active = p.active[:len(p.active)-1]
}
