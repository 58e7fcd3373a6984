package loader

import (
	"sync/atomic"
	"time"
)

// Busy time: each worker stamps the start of its chunk on the pool's
// monotonic clock and, when the chunk is done, adds its length to the
// batch and to the pool. Two clock reads and three atomic ops per chunk of
// 16 samples: noise beside decoding one image.

// workerState is one worker's chunk in progress, padded to its own cache
// line: workers write it once per chunk, readers of Busy read them all.
type workerState struct {
	since atomic.Int64 // pool clock at the chunk's start; 0 while idle
	_     [56]byte
}

// now reads the pool's clock: nanoseconds since NewPool, at least 1 (0
// means idle in workerState).
func (p *Pool) now() int64 { return max(int64(time.Since(p.t0)), 1) }

// chunkStart marks the worker busy from now.
func (wk *worker) chunkStart() {
	wk.start = wk.pool.now()
	wk.state.since.Store(wk.start)
}

// chunkDone adds the chunk's time to b and to the pool, before the chunk
// counts as written: whoever sees the batch done sees its whole time.
func (wk *worker) chunkDone(b *Batch) {
	d := wk.pool.now() - wk.start
	b.busyNs.Add(d)
	wk.pool.busyNs.Add(d)
	wk.state.since.Store(0)
}

// Busy returns the time workers have spent filling chunks since the pool
// started, summed over workers and counting chunks in progress up to now:
// its rate over an interval is the number of busy workers. It never
// decreases.
func (p *Pool) Busy() time.Duration {
	var sum int64
	for range 4 {
		// A chunk that ends while the states are read moves its time from
		// one term to the other: read again if the finished sum changed.
		done := p.busyNs.Load()
		now := p.now()
		sum = done
		for i := range p.states {
			if s := p.states[i].since.Load(); s != 0 && s < now {
				sum += now - s
			}
		}
		if p.busyNs.Load() == done {
			break
		}
	}
	for {
		prev := p.busyMax.Load()
		if sum <= prev {
			return time.Duration(prev)
		}
		if p.busyMax.CompareAndSwap(prev, sum) {
			return time.Duration(sum)
		}
	}
}

// Busy returns the worker time spent filling the batch, summed over its
// chunks (on a busy machine, wall time: it includes time the workers
// waited for a core).
func (b *Batch) Busy() time.Duration { return time.Duration(b.busyNs.Load()) }
