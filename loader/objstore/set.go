package objstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
)

// Set is a dataset's objects, opened without waiting for them: a format
// indexes each object from a few ranged reads (or a sidecar index), serves
// samples by ranged reads of their bytes, and maps each object's cache
// file once its background fill is done. Fills go through the Cache as
// Shards' do (private name, size and ETag checked, rename), in shard
// order, DefaultFills at a time, the shards asked for by Want first.
//
// When the objects fit the cache's bound together, a Set pins their
// cache files until Close, so that filling one never evicts another the
// dataset still needs, and fills them all. When they do not (Bounded), it
// streams them through the cache: it fills only the objects Want asks
// for, pins each from its fill (or Hold) until it lets it go, and makes
// room for a fill by letting go of the object the format touched least
// recently, if that was before the one to fill was first asked for
// (evict, given to Start, unmaps it first); without evict it fills while
// there is room and leaves the rest to ranged reads. It is safe for
// concurrent use.
type Set struct {
	Objects []Object

	cache *Cache
	cl    *client
	paths []string
	ctx   context.Context
	stop  context.CancelFunc

	mu      sync.Mutex
	state   []fillState
	next    int       // the next shard in order to consider
	urgent  []int     // Want's shards, first asked first filled
	asks    sync.Cond // on mu: Want has queued one (Bounded), or Close
	started bool
	closed  bool
	wg      sync.WaitGroup

	// Bounded mode (bounded.go).
	bounded bool
	total   int64          // the objects' bytes
	evict   func(k int)    // from Start: the format lets go of object k
	held    []bool         // pinned by the set, its file the format's to map
	asked   []int64        // the clock when Want last queued object k
	failed  []int64        // the clock when k last found no room; -1: never
	stamps  []atomic.Int64 // the clock when the format last touched k
	clock   atomic.Int64
}

type fillState uint8

const (
	pending fillState = iota
	wanted            // in urgent
	filling
	filled
)

// Open resolves u as Shards does, with the process's cache, without
// fetching anything.
func Open(ctx context.Context, u, ext string, opts Options) (*Set, error) {
	cache, r, err := sharedCache()
	if err != nil {
		return nil, err
	}
	return cache.open(ctx, u, ext, opts, r)
}

// Open is the package's Open with this cache and its Retry.
func (c *Cache) Open(ctx context.Context, u, ext string, opts Options) (*Set, error) {
	return c.open(ctx, u, ext, opts, c.Retry)
}

func (c *Cache) open(ctx context.Context, u, ext string, opts Options, r Retry) (*Set, error) {
	cl, err := getClient(ctx, opts, r)
	if err != nil {
		return nil, err
	}
	objs, err := resolve(ctx, cl, u, ext)
	if err != nil {
		return nil, err
	}
	s := &Set{Objects: objs, cache: c, cl: cl, paths: make([]string, len(objs)), state: make([]fillState, len(objs))}
	s.asks.L = &s.mu
	var total int64
	for i, o := range objs {
		if !safeKey(o.Key) {
			return nil, &Error{Op: "cache", URL: o.URL(), Err: errors.New("the key has an empty, . or .. element: it cannot name a file")}
		}
		s.paths[i] = c.Path(cl.host, o)
		total += o.Size
	}
	s.total = total
	// A dataset that fits stays whole in the cache while open: every
	// shard is filled in the background, and none may evict another. One
	// that does not streams through it (bounded.go).
	if s.bounded = total > c.Limit; s.bounded {
		s.held = make([]bool, len(objs))
		s.asked = make([]int64, len(objs))
		s.failed = make([]int64, len(objs))
		s.stamps = make([]atomic.Int64, len(objs))
		for i := range s.failed {
			s.failed[i] = -1
		}
	} else {
		c.pin(s.paths, 1)
	}
	s.ctx, s.stop = context.WithCancel(context.Background())
	return s, nil
}

// Path is where object k's complete copy lives (or will).
func (s *Set) Path(k int) string { return s.paths[k] }

// Cached reports whether object k's complete copy is in the cache: a
// file under its final name with its size (only a verified fill makes
// one).
func (s *Set) Cached(k int) bool {
	fi, err := os.Stat(s.paths[k])
	return err == nil && fi.Mode().IsRegular() && fi.Size() == s.Objects[k].Size
}

// ReadAt reads len(p) bytes of object k at off with ranged GETs pinned to
// its ETag, retried as fills are. The error names the object.
func (s *Set) ReadAt(ctx context.Context, k int, p []byte, off int64) error {
	o := s.Objects[k]
	if o.Size == 0 {
		return &Error{Op: "get", URL: o.URL(), Err: fmt.Errorf("%w %s", ErrZeroByte, o.Key)}
	}
	if off < 0 || off+int64(len(p)) > o.Size {
		return &Error{Op: "get", URL: o.URL(), Err: fmt.Errorf("bytes [%d, %d) are outside the object's %d", off, off+int64(len(p)), o.Size)}
	}
	w := sliceWriter{p: p}
	_, err := s.cl.readRange(ctx, o, off, off+int64(len(p)), &w)
	return err
}

// sliceWriter fills p in order.
type sliceWriter struct {
	p []byte
	n int
}

func (w *sliceWriter) Write(b []byte) (int, error) {
	if len(b) > len(w.p)-w.n {
		return 0, errors.New("objstore: more bytes than asked for")
	}
	w.n += copy(w.p[w.n:], b)
	return len(b), nil
}

// Get reads a whole small object beside the set's (a sidecar index),
// at most max bytes; a missing one is an *Error wrapping fs.ErrNotExist.
func (s *Set) Get(ctx context.Context, bucket, key string, max int64) ([]byte, Object, error) {
	o, err := s.cl.head(ctx, bucket, key)
	if err != nil {
		return nil, o, err
	}
	if o.Size > max {
		return nil, o, &Error{Op: "get", URL: o.URL(), Err: fmt.Errorf("%d bytes, more than the %d expected", o.Size, max)}
	}
	buf := make([]byte, o.Size)
	if o.Size == 0 {
		return buf, o, nil
	}
	w := sliceWriter{p: buf}
	_, err = s.cl.readRange(ctx, o, 0, o.Size, &w)
	return buf, o, err
}

// Start fills every object not yet cached in the background, Want's first,
// then in order, DefaultFills at a time, and calls done once per object
// as its fill ends (err nil: the file at Path(k) is complete and
// verified). done runs on a fill goroutine. Close stops the fills.
//
// A Bounded set fills only what Want asks for, calls done after each
// fill (an error wrapping ErrCacheFull: no room now; Want may ask again),
// and, evict not nil, calls it to let go of an object to make room: the
// format must stop reading the file and unmap it before evict returns.
func (s *Set) Start(done func(k int, err error), evict func(k int)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.closed {
		return
	}
	s.started = true
	s.evict = evict
	for range min(s.cache.par, len(s.Objects)) {
		s.wg.Go(func() {
			for {
				k, ok := s.take()
				if !ok {
					return
				}
				var err error
				if s.bounded {
					err = s.fillBounded(k)
				} else {
					_, err = s.cache.ensure(s.ctx, s.cl, s.Objects[k], s.paths[k])
					s.mu.Lock()
					s.state[k] = filled
					s.mu.Unlock()
				}
				if s.ctx.Err() != nil {
					return
				}
				done(k, err)
			}
		})
	}
}

// take returns the next object to fill.
func (s *Set) take() (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for !s.closed {
		k := -1
		if len(s.urgent) > 0 {
			k, s.urgent = s.urgent[0], s.urgent[1:]
		} else if s.next < len(s.state) && !s.bounded {
			k = s.next
			s.next++
		} else if s.bounded {
			s.asks.Wait() // a Bounded set's fillers wait for Want
			continue
		} else {
			return 0, false
		}
		if s.state[k] == pending || s.state[k] == wanted {
			s.state[k] = filling
			return k, true
		}
	}
	return 0, false
}

// Want moves object k ahead of the others not being filled yet. It
// returns at once. A Bounded set asks again for an object that found no
// room only once the clock (Tick) has moved on.
func (s *Set) Want(k int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bounded {
		now := s.clock.Load()
		if s.state[k] != pending || s.failed[k] >= now {
			return
		}
		s.asked[k] = now
	}
	if s.state[k] == pending {
		s.state[k] = wanted
		s.urgent = append(s.urgent, k)
		s.asks.Signal()
	}
}

// Close stops the fills (a fill cut short leaves nothing behind) and
// unpins the objects.
func (s *Set) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.asks.Broadcast()
	s.mu.Unlock()
	s.stop()
	s.wg.Wait()
	if !s.bounded {
		s.cache.pin(s.paths, -1)
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, h := range s.held {
		if h {
			s.cache.pin(s.paths[k:k+1], -1)
			s.held[k] = false
		}
	}
	return nil
}
