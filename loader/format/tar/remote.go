package tar

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"sort"
	"strconv"
	"strings"
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
	mapped  atomic.Pointer[[]byte]     // the verified cache file, mapped; nil until its fill is done
	bad     atomic.Pointer[error]      // the cache file contradicts the index the shard was opened with
	wanted  atomic.Bool                // Prefetch asked for it
	readers atomic.Int32               // reads of mapped in progress: evict unmaps at 0
	idx     atomic.Pointer[shardIndex] // the index reads go by; set at open, replaced when a sidecar is dropped
	// gate is read-held by every read of the shard until its hold is
	// released (the member decoded, its label read), and held by a
	// sidecar's drop while it replaces idx: no sample is decoded with
	// one index's bytes and the other's label.
	gate sync.RWMutex
	etag string
}

// shardIndex is what a remote shard's reads go by. It is never changed:
// a dropped sidecar's is replaced whole.
type shardIndex struct {
	members []tarMember // in offset order: the sidecar's, or the shard's headers'; fills are checked against it
	// headers: members come from the shard's own tar headers (a scan, the
	// cache file, or a re-index after a sidecar was dropped), so a ranged
	// read checks the header's checksum and size; a sidecar's members get
	// their names checked too.
	headers bool
	// patch holds the samples (by index) whose entries the shard's own
	// headers changed when its sidecar was dropped.
	patch map[int64]tarSample
}

// maxHeaderGap bounds the header blocks a ranged read fetches before a
// member's own header to read a long (PAX or GNU) name. The blocks
// between two members are their headers, and the entries of directories
// and links: 512 bytes apart, 1.5 KiB with a long name.
const maxHeaderGap = 64 << 10

// sidecarsDropped counts the sidecar indexes dropped since the process
// started (SidecarsDropped).
var sidecarsDropped atomic.Int64

// SidecarsDropped returns how many sidecar indexes (SHARD.tar.idx) this
// process has dropped because a ranged read or a cache fill found that
// they disagree with their shard's tar headers (a member's name, size or
// place): each time the shard was re-indexed from its headers, or, where
// that changes the dataset, its samples failed. For a metrics exporter
// (a counter); each drop is also logged, naming the shard and the member.
func SidecarsDropped() int64 { return sidecarsDropped.Load() }

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
	so, err := o.Store()
	if err != nil {
		return nil, err
	}
	set, err := objstore.Open(t.ctx, o.Path, ".tar", so)
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
			t.shards[k].rem.idx.Store(&shardIndex{members: members[k], headers: how[k] != "sidecar"})
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
	if err == nil {
		if e := sh.rem.bad.Load(); e != nil {
			mmap.Unmap(data) // a read dropped the sidecar and could not mend the shard: said then
			return
		}
		idx := sh.rem.idx.Load()
		switch {
		case sameMembers(ms, idx.members):
		case !idx.headers:
			// The sidecar the shard was opened with is not its index.
			member, found, off := firstDiff(idx.members, ms)
			if err := t.dropSidecar(k, idx, ms, member, found, off); err != nil {
				mmap.Unmap(data) // logged and kept by dropSidecar
				return
			}
			if !sameMembers(ms, sh.rem.idx.Load().members) { // a read dropped it meanwhile, by the same headers
				err = fmt.Errorf("%w: its members differ from the shard's headers read by ranged reads", loader.ErrCorrupt)
			}
		default:
			err = fmt.Errorf("%w: its members differ from the index the dataset was opened with (a sidecar written for another version of the shard?)", loader.ErrCorrupt)
		}
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
type rangeBuf struct {
	b    []byte
	gate *sync.RWMutex // the shard's, read-held until Release
}

// Release implements imagedec.Hold: the buffer goes back to the pool.
func (r *rangeBuf) Release() {
	g := r.gate
	r.gate = nil
	remoteBufs.Put(r)
	g.RUnlock()
}

// Release implements imagedec.Hold for a read of the shard's mapped cache
// file: the read is done, evict may unmap it.
func (rem *remoteShard) Release() {
	rem.readers.Add(-1)
	rem.gate.RUnlock()
}

// readRemote returns sample i of remote shard sh: from the mapped cache
// file, or read with one ranged GET of its header blocks and data into a
// pooled buffer; the hold keeps either (and the shard's gate) until the
// member is decoded. A member whose header names it differently from
// the shard's sidecar has the sidecar dropped, the shard re-indexed from
// its headers (dropSidecar), and is read again by the new index.
func (t *source) readRemote(sh *tarShard, i int64) ([]byte, imagedec.Hold, error) {
	rem := sh.rem
	for try := 0; ; try++ {
		rem.gate.RLock()
		rem.readers.Add(1) // before the load: evict sees the read, or the read sees nil
		if m := rem.mapped.Load(); m != nil {
			s := t.sample(i) // after mapped: a fill maps only once idx agrees with the file
			return (*m)[s.off : s.off+s.size], rem, nil
		}
		rem.readers.Add(-1)
		if e := rem.bad.Load(); e != nil {
			rem.gate.RUnlock()
			return nil, nil, *e
		}
		idx := rem.idx.Load()
		s := t.sample(i)
		data, rb, wrong, err := t.rangedRead(idx, &s)
		if err != nil || wrong == nil {
			if err != nil {
				rem.gate.RUnlock()
				return nil, nil, err
			}
			rb.gate = &rem.gate
			return data, rb, nil
		}
		rem.gate.RUnlock()
		if try > 0 { // cannot happen: a re-indexed shard's reads do not check names
			return nil, nil, fmt.Errorf("%w: the member's tar header names it %q (the index does not match the shard)", loader.ErrCorrupt, wrong.found)
		}
		if err := t.dropSidecar(int(s.shard), idx, nil, wrong.member, wrong.found, s.off); err != nil {
			return nil, nil, err
		}
	}
}

// misnamed is a ranged read's finding that the tar header before a member
// names it differently from the index.
type misnamed struct{ member, found string }

// rangedRead reads sample s's header blocks and data with one ranged GET
// and checks the header before the data: its checksum and size, and,
// when idx is a sidecar's, the member's name (misnamed when it differs).
// Where the gap since the previous member (its header blocks) is more
// than one block, the whole gap is read, so a PAX or GNU long name is
// checked too; over maxHeaderGap, only the member's own header is, and a
// long name there reads as different (the drop then finds the sidecar
// right by the shard's headers, and reads stop checking names).
func (t *source) rangedRead(idx *shardIndex, s *tarSample) ([]byte, *rangeBuf, *misnamed, error) {
	name, gap := memberAt(idx.members, s.off)
	from := s.off - 512
	if !idx.headers && s.off-gap > 512 && s.off-gap <= maxHeaderGap {
		from = gap
	}
	head := s.off - from
	rb := remoteBufs.Get().(*rangeBuf)
	if int64(cap(rb.b)) < s.size+head {
		rb.b = make([]byte, s.size+head)
	}
	buf := rb.b[:s.size+head]
	if err := t.set.ReadAt(t.ctx, int(s.shard), buf, from); err != nil {
		remoteBufs.Put(rb)
		return nil, nil, nil, err
	}
	if err := checkHeader(buf[head-512:head], s.size); err != nil {
		remoteBufs.Put(rb)
		return nil, nil, nil, err
	}
	if !idx.headers {
		if found := headerName(buf, head); found != name {
			remoteBufs.Put(rb)
			return nil, nil, &misnamed{member: name, found: found}, nil
		}
	}
	return buf[head:], rb, nil, nil
}

// memberAt returns the name of the member of ms whose data starts at off,
// and where its header blocks start: the end of the previous member's
// data, rounded up to a block (0 for the first).
func memberAt(ms []tarMember, off int64) (name string, gap int64) {
	j := sort.Search(len(ms), func(j int) bool { return ms[j].off >= off })
	if j == len(ms) || ms[j].off != off {
		return "", off - 512
	}
	if j > 0 {
		gap = (ms[j-1].off + ms[j-1].size + 511) &^ 511
	}
	return ms[j].name, gap
}

// headerName returns the name the tar header blocks in b[:head] give the
// member whose data starts at b[head]: the name field of its own header
// when that is all there is, else what archive/tar reads from the blocks
// (a USTAR prefix, a PAX path, a GNU long name); "" when they do not parse.
func headerName(b []byte, head int64) string {
	own := b[head-512 : head]
	field := string(own[:100])
	if n := strings.IndexByte(field, 0); n >= 0 {
		field = field[:n]
	}
	ustar := string(own[257:263]) == "ustar\x00"
	if head == 512 && (!ustar || own[345] == 0) {
		return field // a lone header without a USTAR prefix: the name is the field
	}
	r := bytes.NewReader(b[:head])
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err != nil {
			return field // a long name over maxHeaderGap: the field holds its start
		}
		if pos := r.Size() - int64(r.Len()); pos >= head {
			if pos == head {
				return h.Name
			}
			return ""
		}
	}
}

// firstDiff returns the first member where index and the shard's headers
// disagree: its name in index, the name the headers give at its offset
// ("" when none starts there), and the offset.
func firstDiff(index, headers []tarMember) (member, found string, off int64) {
	for i, m := range index {
		if i >= len(headers) || m.name != headers[i].name || m.off != headers[i].off || m.size != headers[i].size || !bytes.Equal(m.small, headers[i].small) {
			found, _ = memberAt(headers, m.off)
			return m.name, found, m.off
		}
	}
	if len(headers) > len(index) {
		return "", headers[len(index)].name, headers[len(index)].off
	}
	return "", "", 0
}

// dropSidecar drops shard k's sidecar index seen, which a read or a fill
// found to disagree with the shard's tar headers at member (where the
// headers say found, at data offset off): it re-indexes the shard from
// headers (the shard's own index; read now by ranged reads when nil),
// lays the dataset out again with it, and, when that changes only this
// shard's samples (their members, offsets, order within the shard: not
// the dataset's samples, classes or the other shards'), has reads go by
// it, so every sample is the one the tar holds. Otherwise the shard's
// samples fail with loader.ErrCorrupt naming the shard and the member.
// Either way it is logged and counted (SidecarsDropped). A sidecar the
// headers agree with (a long name the read could not check) is kept,
// and its names are no longer checked.
func (t *source) dropSidecar(k int, seen *shardIndex, headers []tarMember, member, found string, off int64) error {
	sh := &t.shards[k]
	rem := sh.rem
	t.dropMu.Lock()
	defer t.dropMu.Unlock()
	if rem.idx.Load() != seen {
		return nil // dropped meanwhile: read again
	}
	if e := rem.bad.Load(); e != nil {
		return *e
	}
	if headers == nil {
		var err error
		r := &chunkReader{ctx: t.ctx, set: t.set, k: k, size: sh.size}
		if headers, err = indexTar(r, sh.size, true); err != nil {
			return fmt.Errorf("re-indexing the shard from its headers (its sidecar names member %q differently): %w", member, err)
		}
	}
	if sameMembers(seen.members, headers) {
		objstore.Logger().Debug("tar: a member's long name could not be checked by its ranged read; the shard's headers agree with its sidecar", "shard", sh.path, "member", member)
		rem.idx.Store(&shardIndex{members: headers, headers: true, patch: seen.patch})
		return nil
	}
	n := sidecarsDropped.Add(1)
	log := objstore.Logger().With("shard", sh.path, "index", sh.path+SidecarSuffix, "member", member, "tar_header_says", found,
		"offset", off, "sidecars_dropped", n)
	patch, err := t.relayoutShard(k, headers)
	if err != nil {
		err = &loader.RecordError{File: sh.path + "(" + member + ")", Record: -1, Err: fmt.Errorf(
			"%w: the shard's sidecar index %s names the member at offset %d %q, its tar header %q; re-indexed from its headers, "+
				"the shard would change the dataset (%w): delete or rewrite the sidecar (loaderd index), or open with index=scan",
			loader.ErrCorrupt, sh.path+SidecarSuffix, off, member, found, err)}
		rem.bad.Store(&err)
		log.Error("tar: the shard's sidecar index disagrees with its tar headers and cannot be mended; the shard's samples fail", "err", err)
		return err
	}
	rem.gate.Lock() // no read of the shard in flight
	rem.idx.Store(&shardIndex{members: headers, headers: true, patch: patch})
	rem.gate.Unlock()
	log.Warn("tar: the shard's sidecar index disagrees with its tar headers (a member's name); sidecar dropped, the shard re-indexed from its headers",
		"samples_changed", len(patch))
	return nil
}

// relayoutShard lays the dataset out again with shard k's members from
// headers, and returns the samples that changed, all of them shard k's;
// an error when the layout changes anything else.
func (t *source) relayoutShard(k int, headers []tarMember) (map[int64]tarSample, error) {
	for _, m := range headers {
		if unsafeName(m.name) {
			return nil, fmt.Errorf("member %q is absolute or has a .. element", m.name)
		}
	}
	members := make([][]tarMember, len(t.shards))
	for j := range t.shards {
		members[j] = t.shards[j].rem.idx.Load().members
	}
	members[k] = headers
	l, err := t.layout(members)
	if err != nil {
		return nil, err
	}
	if len(l.samples) != len(t.samples) || !slices.Equal(l.classes, t.classes) {
		return nil, fmt.Errorf("%d samples of %d classes, not %d of %d", len(l.samples), len(l.classes), len(t.samples), len(t.classes))
	}
	patch := map[int64]tarSample{}
	for i := range l.samples {
		j := int64(i)
		now, then := l.samples[i], t.sample(j)
		if sameSample(now, then) {
			continue
		}
		if now.shard != int32(k) || then.shard != int32(k) {
			return nil, fmt.Errorf("sample %d would be %s(%s), not %s(%s)", i, t.shards[now.shard].path, now.name, t.shards[then.shard].path, then.name)
		}
		patch[j] = now
	}
	return patch, nil
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
// bytes: the index (a sidecar) agrees with the bytes it points into (the
// name is checked by rangedRead).
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
