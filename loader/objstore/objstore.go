package objstore

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
)

var (
	sharedMu    sync.Mutex
	sharedDir   string
	sharedLimit int64
	shared      *Cache
	sharedRetry = DefaultRetry
)

// SetCache sets the process's cache directory and bound (loaderd serve
// --cache-dir, --cache-bytes), used by every later open of an s3:// path.
// Without it the cache is $LOADERD_CACHE_DIR, else loaderd/shards under
// the user's cache directory (os.UserCacheDir), bounded to half the free
// space.
func SetCache(dir string, limit int64) {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil && (shared.Dir != dir || shared.Limit != limit) {
		shared.Close()
		shared = nil
	}
	sharedDir, sharedLimit = dir, limit
}

// logger receives one line per dataset open (and per fill, at debug).
var logger atomic.Pointer[slog.Logger]

// SetLogger sends objstore's log lines to l instead of slog.Default().
func SetLogger(l *slog.Logger) { logger.Store(l) }

// Logger is where objstore's lines go, for the formats that read
// through it (SetLogger's, else slog.Default()).
func Logger() *slog.Logger { return log() }

func log() *slog.Logger {
	if l := logger.Load(); l != nil {
		return l
	}
	return slog.Default()
}

// SetRetry sets how requests are retried (tests shorten the backoff).
func SetRetry(r Retry) {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	sharedRetry = r
}

// sharedCache returns the process's cache, opened on first use, and the
// retry settings (copied under the lock: SetRetry may run meanwhile).
func sharedCache() (*Cache, Retry, error) {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil {
		return shared, sharedRetry, nil
	}
	dir := sharedDir
	if dir == "" {
		dir = os.Getenv("LOADERD_CACHE_DIR")
	}
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return nil, sharedRetry, fmt.Errorf("objstore: no cache directory (set --cache-dir or LOADERD_CACHE_DIR): %w", err)
		}
		dir = filepath.Join(base, "loaderd", "shards")
	}
	c, err := OpenCache(dir, sharedLimit)
	if err != nil {
		return nil, sharedRetry, err
	}
	shared = c
	return c, sharedRetry, nil
}

// Shards resolves u (s3://BUCKET/KEY, …/PREFIX/, globs, brace ranges; a
// prefix keeps the keys ending in ext) and returns local files holding
// the objects, sorted by key, fetching what the process's cache lacks.
func Shards(ctx context.Context, u, ext string, opts Options) ([]string, error) {
	cache, r, err := sharedCache()
	if err != nil {
		return nil, err
	}
	return cache.shards(ctx, u, ext, opts, r)
}

// Shards is the package's Shards with this cache and its Retry.
func (c *Cache) Shards(ctx context.Context, u, ext string, opts Options) ([]string, error) {
	return c.shards(ctx, u, ext, opts, c.Retry)
}

func (c *Cache) shards(ctx context.Context, u, ext string, opts Options, r Retry) ([]string, error) {
	cl, err := getClient(ctx, opts, r)
	if err != nil {
		return nil, err
	}
	objs, err := resolve(ctx, cl, u, ext)
	if err != nil {
		return nil, err
	}
	return c.fetch(ctx, cl, objs)
}

// resolve lists the objects u names, sorted by key.
func resolve(ctx context.Context, cl *client, u, ext string) ([]Object, error) {
	bucket, key, err := splitURL(u)
	if err != nil {
		return nil, err
	}
	if key == "" || strings.HasSuffix(key, "/") {
		objs, err := cl.list(ctx, bucket, key, "/")
		if err != nil {
			return nil, err
		}
		var out []Object
		for _, o := range objs {
			if strings.HasSuffix(strings.ToLower(o.Key), ext) {
				out = append(out, o)
			}
		}
		if len(out) == 0 {
			return nil, &Error{Op: "list", URL: u, Err: fmt.Errorf("%w: no *%s object under the prefix", fs.ErrNotExist, ext)}
		}
		return out, zeroBytes("list", out)
	}
	patterns, err := expandBraces(key)
	if err != nil {
		return nil, err
	}
	found := make([][]Object, len(patterns))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, p := range patterns {
		g.Go(func() error {
			if !hasGlob(p) {
				o, err := cl.head(gctx, bucket, p)
				found[i] = []Object{o}
				return err
			}
			objs, err := cl.list(gctx, bucket, globPrefix(p), "")
			if err != nil {
				return err
			}
			for _, o := range objs {
				ok, err := matchKey(p, o.Key)
				if err != nil {
					return err
				}
				if ok {
					found[i] = append(found[i], o)
				}
			}
			if len(found[i]) == 0 {
				return &Error{Op: "list", URL: Scheme + bucket + "/" + p, Err: fmt.Errorf("%w: no object matches", fs.ErrNotExist)}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []Object
	for _, objs := range found {
		for _, o := range objs {
			if !seen[o.Key] {
				seen[o.Key] = true
				out = append(out, o)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, zeroBytes(op(patterns), out)
}

// op names how resolve found objects from patterns, for its errors.
func op(patterns []string) string {
	for _, p := range patterns {
		if hasGlob(p) {
			return "list"
		}
	}
	return "head"
}

// zeroBytes fails the first object of no bytes, by name: a shard of
// nothing is an upload that failed, and a format reading it would only
// say it found no sample.
func zeroBytes(op string, objs []Object) error {
	for _, o := range objs {
		if o.Size == 0 {
			return &Error{Op: op, URL: o.URL(), Err: fmt.Errorf("%w %s: it holds no bytes, not a shard (an upload that failed or was cut short?)", ErrZeroByte, o.Key)}
		}
	}
	return nil
}
