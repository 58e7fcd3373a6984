package objstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
)

// Set is a dataset's objects, opened without waiting for them: a format
// indexes each object from a few ranged reads (or a sidecar index), serves
// samples by ranged reads of their bytes, and maps each object's cache
// file once its background fill is done. Fills go through the Cache as
// Shards' do (private name, size and ETag checked, rename), in shard
// order, DefaultFills at a time, the shards asked for by Want first.
//
// A Set pins its objects' cache files until Close, so that filling one
// never evicts another the dataset still needs. It is safe for
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
	next    int   // the next shard in order to consider
	urgent  []int // Want's shards, first asked first filled
	started bool
	closed  bool
	wg      sync.WaitGroup
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
	var total int64
	for i, o := range objs {
		if !safeKey(o.Key) {
			return nil, &Error{Op: "cache", URL: o.URL(), Err: errors.New("the key has an empty, . or .. element: it cannot name a file")}
		}
		s.paths[i] = c.Path(cl.host, o)
		total += o.Size
	}
	// The whole dataset stays in the cache while open: every shard is
	// filled in the background, and none may evict another.
	if total > c.Limit {
		return nil, fmt.Errorf("%w: %s and the rest of its %d objects need %d bytes, the cache at %s holds %d (--cache-bytes)",
			ErrCacheFull, objs[0].URL(), len(objs), total, c.Dir, c.Limit)
	}
	c.pin(s.paths, 1)
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
func (s *Set) Start(done func(k int, err error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.closed {
		return
	}
	s.started = true
	for range min(s.cache.par, len(s.Objects)) {
		s.wg.Go(func() {
			for {
				k, ok := s.take()
				if !ok {
					return
				}
				_, err := s.cache.ensure(s.ctx, s.cl, s.Objects[k], s.paths[k])
				s.mu.Lock()
				s.state[k] = filled
				s.mu.Unlock()
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
		} else if s.next < len(s.state) {
			k = s.next
			s.next++
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
// returns at once.
func (s *Set) Want(k int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state[k] == pending {
		s.state[k] = wanted
		s.urgent = append(s.urgent, k)
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
	s.mu.Unlock()
	s.stop()
	s.wg.Wait()
	s.cache.pin(s.paths, -1)
	return nil
}
