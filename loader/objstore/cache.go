package objstore

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
)

// ErrCacheFull: the shards one dataset needs at once do not fit the
// cache's bound.
var ErrCacheFull = errors.New("objstore: cache too small")

// partialDir holds fills in progress, under random names. Nothing in it
// is ever trusted: OpenCache empties it, which is how a fill cut short by
// kill -9 disappears.
const partialDir = ".partial"

// Cache holds whole objects as local files under Dir, at most Limit bytes
// of them. A file is at DIR/HOST/BUCKET/ETAG/KEY: the key keeps its name
// (errors about a member name the bucket and key), and the ETag in the
// path means a replaced object never passes for its old copy. Files are
// evicted least recently used (a use touches the file's mtime), never
// one a fill in progress needs. Removing a file a source has mapped is
// safe: the mapping keeps it until the source closes.
//
// A Cache is safe for concurrent use. It holds an exclusive lock on
// DIR/.lock: one process per directory (one daemon per node).
type Cache struct {
	Dir   string
	Limit int64
	Retry Retry // how its fills' requests are retried; DefaultRetry from OpenCache

	lock *os.File
	mu   sync.Mutex
	used int64                    // bytes in complete files and reserved for fills
	pins map[string]int           // paths a Fetch in progress needs
	busy map[string]chan struct{} // paths being filled: later callers wait
	par  int
}

// DefaultFills is how many objects one Fetch downloads at once.
const DefaultFills = 4

// OpenCache opens (creating it) the cache directory dir, bounded to limit
// bytes; limit 0 is half the free space of dir's file system at open.
func OpenCache(dir string, limit int64) (*Cache, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("objstore: cache: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("objstore: cache: %w", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("objstore: cache %s is in use by another process (one cache directory per daemon): %w", dir, err)
	}
	c := &Cache{Dir: dir, Limit: limit, lock: lock, pins: map[string]int{}, busy: map[string]chan struct{}{}, par: DefaultFills, Retry: DefaultRetry}
	if err := os.RemoveAll(filepath.Join(dir, partialDir)); err != nil {
		c.Close()
		return nil, fmt.Errorf("objstore: cache: clearing unfinished fills: %w", err)
	}
	if err := os.Mkdir(filepath.Join(dir, partialDir), 0o755); err != nil {
		c.Close()
		return nil, fmt.Errorf("objstore: cache: %w", err)
	}
	if c.Limit == 0 {
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err != nil {
			c.Close()
			return nil, fmt.Errorf("objstore: cache: %w", err)
		}
		c.Limit = int64(st.Bavail) * int64(st.Bsize) / 2 // Bsize is int64 on Linux, uint32 on darwin
	}
	files, err := c.files()
	if err != nil {
		c.Close()
		return nil, err
	}
	for _, f := range files {
		c.used += f.size
	}
	return c, nil
}

// Close releases the directory's lock.
func (c *Cache) Close() error { return c.lock.Close() }

// Used returns the bytes the cache's files hold (and fills have reserved).
func (c *Cache) Used() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}

type cached struct {
	path  string
	size  int64
	mtime time.Time
}

// files lists the complete files, oldest use first.
func (c *Cache) files() ([]cached, error) {
	var out []cached
	err := filepath.WalkDir(c.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == partialDir && filepath.Dir(p) == c.Dir {
			return fs.SkipDir
		}
		if !d.Type().IsRegular() || p == c.lock.Name() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil // evicted meanwhile
		}
		out = append(out, cached{p, fi.Size(), fi.ModTime()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("objstore: cache: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].mtime.Before(out[j].mtime) })
	return out, nil
}

var unsafeETag = regexp.MustCompile(`[^0-9A-Za-z-]`)

// Path is where o's complete copy lives.
func (c *Cache) Path(host string, o Object) string {
	etag := unsafeETag.ReplaceAllString(o.ETag, "_")
	if etag == "" {
		etag = "_"
	}
	return filepath.Join(c.Dir, host, o.Bucket, etag, filepath.FromSlash(o.Key))
}

// fetch returns local files holding objs, in order, filling what is
// missing (DefaultFills at a time). They must fit the bound together.
func (c *Cache) fetch(ctx context.Context, cl *client, objs []Object) ([]string, error) {
	if len(objs) == 0 {
		return nil, nil
	}
	paths := make([]string, len(objs))
	var total int64
	for i, o := range objs {
		if !safeKey(o.Key) {
			return nil, &Error{Op: "cache", URL: o.URL(), Err: errors.New("the key has an empty, . or .. element: it cannot name a file")}
		}
		paths[i] = c.Path(cl.host, o)
		total += o.Size
	}
	if total > c.Limit {
		return nil, fmt.Errorf("%w: %s and the rest of its %d objects need %d bytes, the cache at %s holds %d (--cache-bytes)",
			ErrCacheFull, objs[0].URL(), len(objs), total, c.Dir, c.Limit)
	}
	c.pin(paths, 1)
	defer c.pin(paths, -1)
	start := time.Now()
	var filled, filledBytes atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.par)
	for i, o := range objs {
		g.Go(func() error {
			did, err := c.ensure(gctx, cl, o, paths[i])
			if did {
				filled.Add(1)
				filledBytes.Add(o.Size)
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	// One line per open: what came from the server and what the cache had.
	log().Info("objstore: shards ready", "first", objs[0].URL(), "shards", len(objs), "bytes", total,
		"fetched", filled.Load(), "fetched_bytes", filledBytes.Load(), "took", time.Since(start).Round(time.Millisecond), "cache", c.Dir)
	return paths, nil
}

func (c *Cache) pin(paths []string, d int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range paths {
		if c.pins[p] += d; c.pins[p] == 0 {
			delete(c.pins, p)
		}
	}
}

// ensure makes p a complete copy of o: present with o's size, or filled
// now (once, however many callers ask at the same time).
// It reports whether it filled it.
func (c *Cache) ensure(ctx context.Context, cl *client, o Object, p string) (bool, error) {
	for {
		if fi, err := os.Stat(p); err == nil {
			if fi.Mode().IsRegular() && fi.Size() == o.Size {
				now := time.Now()
				os.Chtimes(p, now, now) // the LRU clock; failing it only ages the file
				return false, nil
			}
			// Not ours to trust (a different size cannot be a copy of
			// this ETag's object): replace it.
			if err := c.remove(p); err != nil {
				return false, &Error{Op: "cache", URL: o.URL(), Err: err}
			}
		}
		c.mu.Lock()
		wait, filling := c.busy[p]
		if !filling {
			c.busy[p] = make(chan struct{})
		}
		c.mu.Unlock()
		if !filling {
			break
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return false, &Error{Op: "cache", URL: o.URL(), Err: ctx.Err()}
		}
	}
	defer func() {
		c.mu.Lock()
		close(c.busy[p])
		delete(c.busy, p)
		c.mu.Unlock()
	}()
	if err := c.reserve(o.Size); err != nil {
		return false, &Error{Op: "cache", URL: o.URL(), Err: err}
	}
	start := time.Now()
	if err := c.fill(ctx, cl, o, p); err != nil {
		c.mu.Lock()
		c.used -= o.Size
		c.mu.Unlock()
		return false, err
	}
	log().Debug("objstore: cached", "object", o.URL(), "bytes", o.Size, "took", time.Since(start), "file", p)
	return true, nil
}

// remove deletes a cache file and forgets its bytes.
func (c *Cache) remove(p string) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return nil
	}
	if err := os.Remove(p); err != nil {
		return err
	}
	c.mu.Lock()
	c.used -= fi.Size()
	c.mu.Unlock()
	return nil
}

// reserve evicts unpinned files, least recently used first, until size
// more bytes fit, and counts them as used.
func (c *Cache) reserve(size int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.used+size <= c.Limit {
		c.used += size
		return nil
	}
	files, err := c.files()
	if err != nil {
		return err
	}
	for _, f := range files {
		if c.used+size <= c.Limit {
			break
		}
		if c.pins[f.path] > 0 || c.busy[f.path] != nil {
			continue
		}
		if err := os.Remove(f.path); err == nil {
			c.used -= f.size
			log().Debug("objstore: evicted", "file", f.path, "bytes", f.size)
		}
	}
	if c.used+size > c.Limit {
		return fmt.Errorf("%w: %d bytes more do not fit %d of %d in use by shards open now", ErrCacheFull, size, c.used, c.Limit)
	}
	c.used += size
	return nil
}

// fill downloads o into a private file, makes it durable, checks it and
// renames it to p: the only way a file reaches a final name.
func (c *Cache) fill(ctx context.Context, cl *client, o Object, p string) error {
	f, err := os.CreateTemp(filepath.Join(c.Dir, partialDir), "fill-*")
	if err != nil {
		return &Error{Op: "cache", URL: o.URL(), Err: err}
	}
	done := false
	defer func() {
		if !done {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	var sum hash.Hash
	w := io.Writer(f)
	if isMD5(o.ETag) {
		sum = md5.New()
		w = io.MultiWriter(f, sum)
	}
	encrypted, err := cl.download(ctx, o, w)
	if err != nil {
		return err
	}
	if encrypted {
		sum = nil // SSE-KMS and SSE-C ETags are not the MD5 of the bytes
	}
	if err := f.Sync(); err != nil {
		return &Error{Op: "cache", URL: o.URL(), Err: err}
	}
	fi, err := f.Stat()
	if err != nil {
		return &Error{Op: "cache", URL: o.URL(), Err: err}
	}
	if fi.Size() != o.Size {
		return &Error{Op: "cache", URL: o.URL(), Err: fmt.Errorf("copy has %d bytes, the object %d", fi.Size(), o.Size)}
	}
	if sum != nil {
		if got := hex.EncodeToString(sum.Sum(nil)); got != o.ETag {
			return &Error{Op: "cache", URL: o.URL(), Err: fmt.Errorf("copy's MD5 %s differs from the ETag %s", got, o.ETag)}
		}
	}
	if err := f.Close(); err != nil {
		return &Error{Op: "cache", URL: o.URL(), Err: err}
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return &Error{Op: "cache", URL: o.URL(), Err: err}
	}
	if err := os.Rename(f.Name(), p); err != nil {
		return &Error{Op: "cache", URL: o.URL(), Err: err}
	}
	done = true
	// The rename itself must survive a power cut, or a restart could
	// find the name but not the file; a crash before this leaves no name.
	if d, err := os.Open(filepath.Dir(p)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// isMD5 reports whether an ETag is an object's MD5: 32 hex digits (a
// multipart upload's ETag ends in -N, and is not).
func isMD5(etag string) bool {
	if len(etag) != 32 {
		return false
	}
	_, err := hex.DecodeString(etag)
	return err == nil
}
