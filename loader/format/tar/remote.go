package tar

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/format/internal/mmap"
	"github.com/loaderd/loaderd/loader/format/internal/options"
	"github.com/loaderd/loaderd/loader/imagedec"
	"github.com/loaderd/loaderd/loader/objstore"
)

// Remote shards (s3://…). The open lists the objects and indexes each one
// without downloading it: from its cache file when the cache holds it,
// else from its sidecar SHARD.tar.idx, else from its headers, read with
// ranged GETs of scanChunk bytes. Then every shard fills the cache in the
// background (the ones the loader's next batches need first: Prefetch);
// until its fill is verified, a sample is one ranged GET of its header
// and data, and after it, a slice of the mapped cache file, as for a local
// shard. A partial fill is never read: the cache renames a file into
// place only once its size and ETag check out.
//
// A dataset larger than the cache streams through it (objstore.Set's
// Bounded mode, bounded.go): only the shards Prefetch asks for are
// filled, and with order=shards a shard whose window is past is let go
// (unmapped once no read uses it, then evictable) to make room.

// remoteShard is one object's state.
type remoteShard struct {
	mapped  atomic.Pointer[[]byte] // the verified cache file, mapped; nil until its fill is done
	bad     atomic.Pointer[error]  // the cache file contradicts the index the shard was opened with
	wanted  atomic.Bool            // Prefetch asked for it
	readers atomic.Int32           // reads of mapped in progress: evict unmaps at 0
	members []tarMember            // that index, to check the cache file against
	etag    string
}

// scanChunk is how much one ranged GET of a header scan reads: every
// header whose member starts in it costs nothing more. Small members
// (CIFAR's 2–3 KB JPEGs) make the scan read the whole shard in a few
// dozen requests; large ones (ImageNet's ~110 KB) take one request each.
var scanChunk int64 = 1 << 20

// backgroundFills is off in tests that must read every sample remotely.
var backgroundFills = true

// remoteBufs holds the buffers of ranged member reads.
var remoteBufs = sync.Pool{New: func() any { return new(rangeBuf) }}

// openRemote indexes the objects o.Path names. mode is index=: auto
// (cache file, sidecar, headers), or scan (ignore sidecars).
func (t *source) openRemote(o *options.Options, mode string) ([][]tarMember, error) {
	start := time.Now()
	t.ctx, t.stop = context.WithCancel(context.Background())
	set, err := objstore.Open(t.ctx, o.Path, ".tar", objstore.Options{Endpoint: o.Get("endpoint"), Region: o.Get("region")})
	if err != nil {
		return nil, err
	}
	t.set = set
	n := len(set.Objects)
	members := make([][]tarMember, n)
	how := make([]string, n)
	t.shards = make([]tarShard, n)
	for k, ob := range set.Objects {
		t.shards[k] = tarShard{path: ob.URL(), rem: &remoteShard{etag: ob.ETag}, size: ob.Size}
	}
	g, ctx := errgroup.WithContext(t.ctx)
	g.SetLimit(16)
	for k := range n {
		g.Go(func() error {
			var err error
			members[k], how[k], err = t.indexRemote(ctx, k, mode)
			if err != nil {
				return &loader.RecordError{File: t.shards[k].path, Record: -1, Err: err}
			}
			t.shards[k].rem.members = members[k]
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	t.indexedBy = how
	counts := map[string]int{}
	for _, h := range how {
		counts[h]++
	}
	objstore.Logger().Info("tar: remote shards indexed", "first", t.shards[0].path, "shards", n, "cached", counts["cache"],
		"sidecar", counts["sidecar"], "scanned", counts["scan"], "took", time.Since(start).Round(time.Millisecond))
	return members, nil
}

// indexRemote indexes shard k and says how.
func (t *source) indexRemote(ctx context.Context, k int, mode string) ([]tarMember, string, error) {
	ob := t.set.Objects[k]
	if t.set.Hold(k) {
		data, err := mmap.Map(t.set.Path(k))
		if err == nil {
			ms, err := indexTar(bytes.NewReader(data), int64(len(data)), true)
			if err != nil {
				mmap.Unmap(data)
				return nil, "", err
			}
			t.shards[k].rem.mapped.Store(&data)
			return ms, "cache", nil
		}
		// Evicted meanwhile: read it from the server.
	}
	if mode != "scan" {
		b, _, err := t.set.Get(ctx, ob.Bucket, ob.Key+SidecarSuffix, maxSidecar)
		switch {
		case err == nil:
			ms, err := parseIndex(b, ob.Size, ob.ETag)
			if err == nil {
				return ms, "sidecar", nil
			}
			objstore.Logger().Warn("tar: sidecar index ignored; reading the shard's headers", "index", ob.URL()+SidecarSuffix, "reason", err)
		case !errors.Is(err, fs.ErrNotExist):
			return nil, "", err
		}
	}
	r := &chunkReader{ctx: ctx, set: t.set, k: k, size: ob.Size}
	ms, err := indexTar(r, ob.Size, true)
	return ms, "scan", err
}

// chunkReader reads an object through ranged GETs of scanChunk bytes,
// keeping the last one.
type chunkReader struct {
	ctx   context.Context
	set   *objstore.Set
	k     int
	size  int64
	buf   []byte
	start int64 // buf holds bytes [start, start+len(buf))
	gets  int
}

func (r *chunkReader) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) && off < r.size {
		if off < r.start || off >= r.start+int64(len(r.buf)) {
			end := min(r.size, off+max(scanChunk, int64(len(p)-n)))
			if int64(cap(r.buf)) < end-off {
				r.buf = make([]byte, end-off)
			}
			r.buf = r.buf[:end-off]
			if err := r.set.ReadAt(r.ctx, r.k, r.buf, off); err != nil {
				r.buf = r.buf[:0]
				return n, err
			}
			r.start = off
			r.gets++
		}
		c := copy(p[n:], r.buf[off-r.start:])
		n += c
		off += int64(c)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// filled runs when shard k's background fill ends: map the file, check it
// against the index the shard was opened with, and serve from it.
func (t *source) filled(k int, err error) {
	sh := &t.shards[k]
	if errors.Is(err, objstore.ErrCacheFull) && t.set.Bounded() {
		// No room now: ranged reads, and Prefetch asks again later.
		objstore.Logger().Debug("tar: no room in the cache for the shard yet; its samples are ranged reads", "shard", sh.path, "err", err)
		sh.rem.wanted.Store(false)
		return
	}
	if err != nil {
		objstore.Logger().Warn("tar: shard not cached; its samples stay ranged reads", "shard", sh.path, "err", err)
		return
	}
	data, err := mmap.Map(t.set.Path(k))
	if err != nil {
		objstore.Logger().Warn("tar: cached shard not mapped; its samples stay ranged reads", "shard", sh.path, "err", err)
		return
	}
	ms, err := indexTar(bytes.NewReader(data), int64(len(data)), true)
	if err == nil && !sameMembers(ms, sh.rem.members) {
		err = fmt.Errorf("%w: its members differ from the index the dataset was opened with (a sidecar written for another version of the shard?)", loader.ErrCorrupt)
	}
	if err != nil {
		mmap.Unmap(data)
		sh.rem.bad.Store(&err)
		objstore.Logger().Error("tar: cached shard contradicts its index; its samples fail", "shard", sh.path, "err", err)
		return
	}
	sh.rem.mapped.Store(&data)
}

func sameMembers(a, b []tarMember) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].name != b[i].name || a[i].off != b[i].off || a[i].size != b[i].size || !bytes.Equal(a[i].small, b[i].small) {
			return false
		}
	}
	return true
}

// rangeBuf is the pooled buffer of a ranged member read, held until the
// member is decoded (imagedec.Hold).
type rangeBuf struct{ b []byte }

// Release implements imagedec.Hold: the buffer goes back to the pool.
func (r *rangeBuf) Release() { remoteBufs.Put(r) }

// Release implements imagedec.Hold for a read of the shard's mapped cache
// file: the read is done, evict may unmap it.
func (rem *remoteShard) Release() { rem.readers.Add(-1) }

// readRemote returns sample s of remote shard sh: from the mapped cache
// file, or read with one ranged GET of its header and data into a pooled
// buffer; the hold keeps either until the member is decoded.
func (t *source) readRemote(sh *tarShard, s *tarSample) ([]byte, imagedec.Hold, error) {
	rem := sh.rem
	rem.readers.Add(1) // before the load: evict sees the read, or the read sees nil
	if m := rem.mapped.Load(); m != nil {
		return (*m)[s.off : s.off+s.size], rem, nil
	}
	rem.readers.Add(-1)
	if e := rem.bad.Load(); e != nil {
		return nil, nil, *e
	}
	rb := remoteBufs.Get().(*rangeBuf)
	if int64(cap(rb.b)) < s.size+512 {
		rb.b = make([]byte, s.size+512)
	}
	buf := rb.b[:s.size+512]
	if err := t.set.ReadAt(t.ctx, int(s.shard), buf, s.off-512); err != nil {
		remoteBufs.Put(rb)
		return nil, nil, err
	}
	if err := checkHeader(buf[:512], s.size); err != nil {
		remoteBufs.Put(rb)
		return nil, nil, err
	}
	return buf[512:], rb, nil
}

// evict lets shard k's cache file go (objstore.Set's evict): later reads
// are ranged until Prefetch has it filled again; the mapping goes once
// the reads using it are done.
func (t *source) evict(k int) {
	rem := t.shards[k].rem
	m := rem.mapped.Swap(nil)
	for rem.readers.Load() > 0 {
		time.Sleep(50 * time.Microsecond)
	}
	if m != nil {
		mmap.Unmap(*m)
	}
	rem.wanted.Store(false)
	objstore.Logger().Debug("tar: shard let go of", "shard", t.shards[k].path)
}

// startFills starts the background fills, saying first what a dataset
// larger than the cache will do: with order=shards, stream through it a
// window at a time; uniform, keep what fits and read the rest by ranged
// reads every epoch.
func (t *source) startFills() {
	if t.set == nil || !backgroundFills {
		return
	}
	if !t.set.Bounded() {
		t.set.Start(t.filled, nil)
		return
	}
	var largest int64
	for _, ob := range t.set.Objects {
		largest = max(largest, ob.Size)
	}
	log := objstore.Logger().With("dataset", t.path, "dataset_bytes", t.set.Bytes(), "cache_bytes", t.set.CacheLimit(), "cache", t.set.CacheDir())
	if t.order == nil {
		log.Warn("tar: the dataset is larger than the cache: order=uniform reads every shard all epoch, so the cache keeps the shards that fit "+
			"and the others are ranged reads from the server every epoch (set order=shards to stream the dataset through the cache, or raise --cache-bytes)",
			"cached_share", fmt.Sprintf("%.0f%%", 100*float64(t.set.CacheLimit())/float64(t.set.Bytes())))
		t.set.Start(t.filled, nil)
		return
	}
	need := 2 * int64(t.order.Window()) * largest
	if t.set.CacheLimit() < need {
		log.Warn("tar: the cache holds less than two windows of shards: some shards are ranged reads (raise --cache-bytes or lower order=shards:W)",
			"window", t.order.Window(), "largest_shard", largest, "want_cache_bytes", need)
	} else {
		log.Info("tar: the dataset is larger than the cache: streaming it through, a window of shards at a time", "window", t.order.Window())
	}
	t.set.Start(t.filled, t.evict)
}

// checkHeader checks that h is a valid tar header for a member of size
// bytes: the index (a sidecar) agrees with the bytes it points into.
func checkHeader(h []byte, size int64) error {
	var sum, signed int64 // some old tars summed signed chars; archive/tar takes both
	for i, c := range h {
		if i >= 148 && i < 156 {
			c = ' '
		}
		sum += int64(c)
		signed += int64(int8(c))
	}
	want, err := strconv.ParseInt(string(bytes.Trim(h[148:156], " \x00")), 8, 64)
	if err != nil || want != sum && want != signed {
		return fmt.Errorf("%w: no valid tar header before the member's data (the index does not match the shard)", loader.ErrCorrupt)
	}
	if got, err := strconv.ParseInt(string(bytes.Trim(h[124:136], " \x00")), 8, 64); err == nil && got != size {
		return fmt.Errorf("%w: the header before the member declares %d bytes, the index %d (the index does not match the shard)", loader.ErrCorrupt, got, size)
	}
	return nil
}

// Prefetch implements loader.Prefetcher: the shards of indices that are
// not cached yet are filled next.
func (t *source) Prefetch(indices []int64) {
	if t.set == nil {
		return
	}
	t.set.Tick()
	last := int32(-1)
	for _, i := range indices {
		if i < 0 || i >= int64(len(t.samples)) {
			continue
		}
		k := t.samples[i].shard
		if k == last {
			continue
		}
		last = k
		t.set.Touch(int(k))
		rem := t.shards[k].rem
		if rem.mapped.Load() == nil && !rem.wanted.Load() && !rem.wanted.Swap(true) {
			t.set.Want(int(k))
		}
	}
}
