package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loaderd/loaderd/loader/objstore"
	"github.com/loaderd/loaderd/loader/objstore/s3test"
)

// fastRetry keeps the fault tests quick: the same schedule shape as
// DefaultRetry, with millisecond delays and a short stall timeout.
var fastRetry = objstore.Retry{Attempts: 5, Base: 2 * time.Millisecond, MaxDelay: 20 * time.Millisecond, Stall: 400 * time.Millisecond}

// env is a server, a fault proxy in front of it and a fresh cache.
type env struct {
	srv   *s3test.Server
	px    *s3test.Proxy
	cache *objstore.Cache
	opts  objstore.Options
}

func newEnv(t *testing.T, limit int64) *env {
	srv := s3test.Start(t)
	e := &env{srv: srv, px: s3test.NewProxy(t, srv)}
	e.opts = objstore.Options{Endpoint: e.px.URL}
	e.cache = openCache(t, t.TempDir(), limit)
	return e
}

func openCache(t *testing.T, dir string, limit int64) *objstore.Cache {
	t.Helper()
	c, err := objstore.OpenCache(dir, limit)
	if err != nil {
		t.Fatal(err)
	}
	c.Retry = fastRetry
	t.Cleanup(func() { c.Close() })
	return c
}

func blob(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func (e *env) shards(t *testing.T, u string) ([]string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return e.cache.Shards(ctx, u, ".tar", e.opts)
}

func checkFiles(t *testing.T, files []string, want ...[]byte) {
	t.Helper()
	if len(files) != len(want) {
		t.Fatalf("%d files %q, want %d", len(files), files, len(want))
	}
	for i, f := range files {
		got, err := os.ReadFile(f)
		if err != nil || !bytes.Equal(got, want[i]) {
			t.Fatalf("file %d (%s): %d bytes, equal %v, %v", i, f, len(got), bytes.Equal(got, want[i]), err)
		}
	}
}

// noPartial: nothing half-written is left, and no final name holds a
// file other than complete copies.
func noPartial(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, ".partial"))
	if err != nil || len(ents) != 0 {
		t.Fatalf(".partial holds %v (%v): a failed fill left a file", ents, err)
	}
}

// TestShards: keys, prefixes, globs and brace ranges name the right
// objects, in key order; a second open reads nothing but listings.
func TestShards(t *testing.T) {
	e := newEnv(t, 0)
	b := e.srv.Bucket(t, "data")
	var want [][]byte
	for i := range 3 {
		want = append(want, blob(10000+i, uint64(i)))
		e.srv.Put(t, b, fmt.Sprintf("cifar/train-%03d.tar", i), want[i])
	}
	e.srv.Put(t, b, "cifar/README.txt", []byte("not a shard"))
	e.srv.Put(t, b, "cifar/sub/deeper.tar", []byte("not directly under the prefix"))
	for u, w := range map[string][][]byte{
		"s3://data/cifar/train-{000..002}.tar": want,
		"s3://data/cifar/":                     want,
		"s3://data/cifar/train-00[02].tar":     {want[0], want[2]},
		"s3://data/cifar/*-001.tar":            {want[1]},
		"s3://data/cifar/train-002.tar":        {want[2]},
	} {
		files, err := e.shards(t, u)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		checkFiles(t, files, w...)
	}
	if n := e.px.Count("GET", 0); n != 3+3 { // 3 objects, 3 listings
		t.Fatalf("%d GETs, want 6: each shard fetched once, 3 listings", n)
	}
	if got := e.cache.Used(); got != 30003 {
		t.Fatalf("cache uses %d bytes, want 30003", got)
	}
	// A restarted daemon trusts what a previous one cached.
	e.cache.Close()
	c2 := openCache(t, e.cache.Dir, 0)
	files, err := c2.Shards(context.Background(), "s3://data/cifar/", ".tar", e.opts)
	if err != nil {
		t.Fatal(err)
	}
	checkFiles(t, files, want...)
	if n := e.px.Count("GET", 0); n != 7 { // one more listing, no object
		t.Fatalf("%d GETs after a restart, want 7: one more listing, no fill", n)
	}
	// A replaced object gets a new copy: the ETag is in its path.
	want[1] = blob(5000, 99)
	e.srv.Put(t, b, "cifar/train-001.tar", want[1])
	files, err = c2.Shards(context.Background(), "s3://data/cifar/", ".tar", e.opts)
	if err != nil {
		t.Fatal(err)
	}
	checkFiles(t, files, want...)
}

// TestFaults: each injected fault is retried to success with the right
// bytes, or, when it persists or cannot heal, is an error naming the
// bucket and key; a failed fill leaves no file behind.
func TestFaults(t *testing.T) {
	e := newEnv(t, 0)
	b := e.srv.Bucket(t, "faults")
	data := blob(3<<20, 7) // several reads: a cut lands mid-body
	e.srv.Put(t, b, "shard.tar", data)
	const u = "s3://faults/shard.tar"
	for _, tc := range []struct {
		fault  s3test.Fault
		n      int
		method string
	}{
		{s3test.SlowDown, 3, "GET"}, {s3test.SlowDown, 2, "HEAD"},
		{s3test.Reset, 2, "GET"}, {s3test.Reset, 2, "HEAD"},
		{s3test.Truncate, 3, "GET"}, {s3test.Stall, 1, "GET"},
		{s3test.Hang, 1, "GET"}, {s3test.Hang, 1, "HEAD"},
	} {
		t.Run(fmt.Sprintf("%s-%s-x%d", tc.method, tc.fault, tc.n), func(t *testing.T) {
			e.cache = openCache(t, t.TempDir(), 0)
			before := e.px.Count(tc.method, tc.fault)
			e.px.Inject(tc.fault, tc.n, tc.method, "shard.tar")
			start := time.Now()
			files, err := e.shards(t, u)
			if err != nil {
				t.Fatalf("not retried to success: %v", err)
			}
			checkFiles(t, files, data)
			if got := e.px.Count(tc.method, tc.fault) - before; got != tc.n {
				t.Fatalf("%d faults injected, want %d", got, tc.n)
			}
			t.Logf("%d× %s on %s: retried to success in %v", tc.n, tc.fault, tc.method, time.Since(start).Round(time.Millisecond))
		})
	}
	for _, tc := range []struct {
		name, url string
		fault     s3test.Fault
		want      string
		notExist  bool
	}{
		{"missing", "s3://faults/nope.tar", 0, "s3://faults/nope.tar", true},
		{"missing-bucket", "s3://nobucket/shard.tar", 0, "s3://nobucket/shard.tar", true},
		{"missing-glob", "s3://faults/x-*.tar", 0, "s3://faults/x-*.tar", true},
		{"slowdown-persists", u, s3test.SlowDown, "get s3://faults/shard.tar", false},
		{"nobody-persists", u, s3test.NoBody, "get s3://faults/shard.tar: gave up after 5 attempts", false},
		{"reset-persists", u, s3test.Reset, "get s3://faults/shard.tar", false},
		{"hang-persists", u, s3test.Hang, "get s3://faults/shard.tar", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.cache = openCache(t, t.TempDir(), 0)
			e.px.Clear()
			if tc.fault != 0 {
				e.px.Inject(tc.fault, 1000, "GET", "shard.tar")
				defer e.px.Clear()
			}
			files, err := e.shards(t, tc.url)
			if err == nil {
				t.Fatalf("got %q, want an error", files)
			}
			var oe *objstore.Error
			if !errors.As(err, &oe) || !strings.Contains(err.Error(), tc.want) || errors.Is(err, fs.ErrNotExist) != tc.notExist {
				t.Fatalf("error %q (%T): want an *objstore.Error containing %q, fs.ErrNotExist %v", err, err, tc.want, tc.notExist)
			}
			t.Logf("%v", err)
			noPartial(t, e.cache.Dir)
			if e.cache.Used() != 0 {
				t.Fatalf("a failed fill still counts %d bytes", e.cache.Used())
			}
		})
	}
}

// TestCacheBound: least recently used shards make room; what one
// dataset needs at once must fit.
func TestCacheBound(t *testing.T) {
	e := newEnv(t, 25000)
	b := e.srv.Bucket(t, "bound")
	var want [][]byte
	for i := range 3 {
		want = append(want, blob(10000, uint64(i)))
		e.srv.Put(t, b, fmt.Sprintf("s-%d.tar", i), want[i])
	}
	var paths []string
	for i := range 3 {
		files, err := e.shards(t, fmt.Sprintf("s3://bound/s-%d.tar", i))
		if err != nil {
			t.Fatal(err)
		}
		checkFiles(t, files, want[i])
		paths = append(paths, files[0])
		time.Sleep(10 * time.Millisecond) // distinct mtimes
	}
	if _, err := os.Stat(paths[0]); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the least recently used shard was not evicted: %v", err)
	}
	for _, p := range paths[1:] {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("a recent shard was evicted: %v", err)
		}
	}
	if e.cache.Used() != 20000 {
		t.Fatalf("used %d, want 20000", e.cache.Used())
	}
	if _, err := e.shards(t, "s3://bound/s-{0..2}.tar"); !errors.Is(err, objstore.ErrCacheFull) {
		t.Fatalf("3 shards of 10 kB in a 25 kB cache: %v, want ErrCacheFull", err)
	}
	// A file of the wrong size under a final name is not trusted.
	if err := os.WriteFile(paths[1], []byte("short"), 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := e.shards(t, "s3://bound/s-1.tar")
	if err != nil {
		t.Fatal(err)
	}
	checkFiles(t, files, want[1])
}

// TestReplacedMidFill: an object replaced while its fill is resuming
// fails the fill (If-Match) instead of splicing two versions; the next
// open fetches the new one whole.
func TestReplacedMidFill(t *testing.T) {
	e := newEnv(t, 0)
	b := e.srv.Bucket(t, "replace")
	old, repl := blob(2<<20, 1), blob(2<<20, 2)
	e.srv.Put(t, b, "s.tar", old)
	e.px.Inject(s3test.Stall, 1, "GET", "s.tar")
	done := make(chan error, 1)
	go func() {
		_, err := e.shards(t, "s3://replace/s.tar")
		done <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		m, _ := filepath.Glob(filepath.Join(e.cache.Dir, ".partial", "*"))
		if len(m) > 0 {
			if fi, err := os.Stat(m[0]); err == nil && fi.Size() > 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the fill never started")
		}
	}
	e.srv.Put(t, b, "s.tar", repl) // while the stalled body waits for the watchdog
	err := <-done
	if err == nil || !strings.Contains(err.Error(), "s3://replace/s.tar") || !strings.Contains(err.Error(), "replaced while it was being fetched (412 PreconditionFailed)") {
		t.Fatalf("fill across a replacement: %v, want PreconditionFailed naming s3://replace/s.tar", err)
	}
	t.Logf("%v", err)
	noPartial(t, e.cache.Dir)
	files, err := e.shards(t, "s3://replace/s.tar")
	if err != nil {
		t.Fatal(err)
	}
	checkFiles(t, files, repl)
}

// TestConcurrentOpens: two opens of the same shard at once fill it once.
func TestConcurrentOpens(t *testing.T) {
	e := newEnv(t, 0)
	b := e.srv.Bucket(t, "twice")
	data := blob(1<<20, 5)
	e.srv.Put(t, b, "s.tar", data)
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			files, err := e.shards(t, "s3://twice/s.tar")
			if err == nil {
				var got []byte
				if got, err = os.ReadFile(files[0]); err == nil && !bytes.Equal(got, data) {
					err = errors.New("wrong bytes")
				}
			}
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := e.px.Count("GET", 0); n != 1 {
		t.Fatalf("%d GETs, want 1", n)
	}
}
