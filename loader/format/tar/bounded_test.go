package tar

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/internal/loadertest"
	"github.com/loaderd/loaderd/loader/objstore"
	"github.com/loaderd/loaderd/loader/objstore/s3test"
)

// boundedEnv is `shards` WebDataset shards of `per` samples on versitygw
// and on disk, and a process cache bounded to `fit` of them.
type boundedEnv struct {
	dir, url, cache string
	limit, shard    int64
}

func newBoundedEnv(t *testing.T, shards, per int, fit float64) *boundedEnv {
	srv := s3test.Start(t)
	e := &boundedEnv{dir: t.TempDir(), cache: t.TempDir()}
	png, jpg := loadertest.Fixture(t, "img/rgb.png"), loadertest.Fixture(t, "img/rgb.jpg")
	b := srv.Bucket(t, "data")
	for k := range shards {
		var ms []entry
		for i := range per {
			img := jpg
			if i%5 == 1 {
				img = png
			}
			key := fmt.Sprintf("s%d/%03d", k, i)
			ms = append(ms, entry{name: key + ".jpg", data: img}, entry{name: key + ".cls", data: []byte(fmt.Sprint((k + i) % 3))})
		}
		p := filepath.Join(e.dir, fmt.Sprintf("train-%03d.tar", k))
		writeTar(t, p, ms...)
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		e.shard = max(e.shard, fi.Size())
		srv.PutFile(t, b, "wds/"+filepath.Base(p), p)
	}
	e.limit = int64(fit * float64(e.shard))
	objstore.SetCache(e.cache, e.limit)
	objstore.SetRetry(objstore.Retry{Attempts: 5, Base: 2 * time.Millisecond, MaxDelay: 20 * time.Millisecond, Stall: 2 * time.Second})
	t.Cleanup(func() {
		objstore.SetCache("", 0)
		objstore.SetRetry(objstore.DefaultRetry)
	})
	e.url = fmt.Sprintf("s3://data/wds/train-{000..%03d}.tar?endpoint=%s", shards-1, srv.Endpoint)
	return e
}

// watchCache samples the bytes of the files under dir (complete and
// partial) until stop is closed, and returns the most it saw and how
// many distinct complete files it saw.
func watchCache(dir string, stop <-chan struct{}) func() (int64, int) {
	var most atomic.Int64
	seen := map[string]bool{}
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			var used int64
			inodes := map[uint64]bool{} // a fill renamed during the walk is seen twice
			filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err != nil || !d.Type().IsRegular() || d.Name() == ".lock" {
					return nil
				}
				if fi, err := d.Info(); err == nil && !inodes[fi.Sys().(*syscall.Stat_t).Ino] {
					inodes[fi.Sys().(*syscall.Stat_t).Ino] = true
					used += fi.Size()
					if !strings.Contains(p, "/.partial/") {
						mu.Lock()
						seen[p] = true
						mu.Unlock()
					}
				}
				return nil
			})
			most.Store(max(most.Load(), used))
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	return func() (int64, int) {
		<-done
		return most.Load(), len(seen)
	}
}

// deletedMappings counts this process's mappings of files under dir that
// were removed: a cache file let go of but still mapped, holding its
// disk space beyond the bound.
func deletedMappings(t *testing.T, dir string) int {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(maps), "\n") {
		if strings.Contains(line, dir) && strings.HasSuffix(line, "(deleted)") {
			n++
		}
	}
	return n
}

// TestRemoteLargerThanCache: a dataset of 8 shards through a cache that
// holds 3.2 of them, through a Loader. In shard-shuffle order two epochs
// complete, each reading every sample exactly once with its pixels and
// label, the cache's files never exceed the bound, shards are filled and
// let go as the windows pass (more distinct files than fit), and no file
// let go stays mapped. In the uniform order the same holds, except that
// the cache keeps the 3 shards that fit and the open warns with the
// numbers: the rest are ranged reads.
func TestRemoteLargerThanCache(t *testing.T) {
	for _, tc := range []struct {
		order  string
		stream bool   // more distinct shards cached than fit
		log    string // in the open's warning or note
	}{
		{"shards:1", true, "streaming it through"},
		{"uniform", false, "order=uniform reads every shard all epoch"},
	} {
		t.Run("order="+tc.order, func(t *testing.T) { largerThanCache(t, tc.order, tc.stream, tc.log) })
	}
}

func largerThanCache(t *testing.T, order string, stream bool, wantLog string) {
	const shards, per, epochs = 8, 100, 2
	e := newBoundedEnv(t, shards, per, 3.2)
	logs := lockedWriter{mu: new(sync.Mutex), w: new(bytes.Buffer)}
	objstore.SetLogger(slog.New(slog.NewTextHandler(logs, nil)))
	t.Cleanup(func() { objstore.SetLogger(nil) })
	src := openT(t, e.url+"&order="+order)
	if !src.set.Bounded() {
		t.Fatalf("dataset of %d×%d bytes is not streamed through a cache of %d", shards, e.shard, e.limit)
	}
	logs.mu.Lock()
	opened := logs.w.String()
	logs.mu.Unlock()
	if !strings.Contains(opened, wantLog) || !strings.Contains(opened, fmt.Sprintf("dataset_bytes=%d cache_bytes=%d", 8*e.shard, e.limit)) {
		t.Errorf("the open's log does not say %q with the numbers:\n%s", wantLog, opened)
	}
	local := openT(t, e.dir)
	_, want := loadertest.Samples(t, local)
	stop := make(chan struct{})
	watched := watchCache(e.cache, stop)
	pipe, err := augment.NewPipeline(src.Spec())
	if err != nil {
		t.Fatal(err)
	}
	pool := loader.NewPool(2)
	defer pool.Close()
	l, err := loader.New(pool, loader.Config{Source: src, Pipeline: pipe, World: 1, Seed: 3, Shuffle: true, BatchSize: 8, Epochs: epochs})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	counts := make([][]int, epochs)
	for ep := range counts {
		counts[ep] = make([]int, shards*per)
	}
	sample := int(src.Spec().Bytes())
	for {
		bt, err := l.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			close(stop)
			t.Fatal(err)
		}
		for j, i := range bt.Indices {
			counts[bt.Epoch][i]++
			label, _ := src.Label(i)
			if !bytes.Equal(bt.Data[j*sample:(j+1)*sample], want[i]) || bt.Labels[j] != label {
				close(stop)
				t.Fatalf("epoch %d, sample %d (%s): pixels or label %d differ from the local shard's", bt.Epoch, i, src.Name(i), bt.Labels[j])
			}
		}
		bt.Release()
	}
	close(stop)
	most, files := watched()
	for ep, c := range counts {
		for i, n := range c {
			if n != 1 {
				t.Fatalf("epoch %d read sample %d %d times", ep, i, n)
			}
		}
	}
	if most > e.limit {
		t.Errorf("the cache's files reached %d bytes, over the bound %d", most, e.limit)
	}
	if stream && files <= 3 || !stream && files != 3 {
		t.Errorf("%d distinct shards were cached; 3 fit, and the cache should stream: %v", files, stream)
	}
	if n := deletedMappings(t, e.cache); n != 0 {
		t.Errorf("%d cache files let go of are still mapped", n)
	}
	t.Logf("cache bound %d (%.1f shards of %d bytes), at most %d used, %d distinct shards cached", e.limit, float64(e.limit)/float64(e.shard), e.shard, most, files)
}
