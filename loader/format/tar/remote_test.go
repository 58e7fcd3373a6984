package tar

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/internal/loadertest"
	"github.com/loaderd/loaderd/loader/objstore"
	"github.com/loaderd/loaderd/loader/objstore/s3test"
)

// remoteEnv is versitygw behind a fault proxy, three WebDataset shards
// (one with a PAX long name and a member larger than scanChunk) as local
// files and as objects, and a fresh process cache.
type remoteEnv struct {
	srv    *s3test.Server
	px     *s3test.Proxy
	dir    string   // the local shards
	shards []string // their paths
	url    string   // tar:s3://… naming the same shards, through the proxy
}

func newRemoteEnv(t *testing.T) *remoteEnv {
	srv := s3test.Start(t)
	e := &remoteEnv{srv: srv, px: s3test.NewProxy(t, srv), dir: t.TempDir()}
	objstore.SetCache(t.TempDir(), 0)
	objstore.SetRetry(objstore.Retry{Attempts: 5, Base: 2 * time.Millisecond, MaxDelay: 20 * time.Millisecond, Stall: 400 * time.Millisecond})
	old := scanChunk
	scanChunk = 4096 // several members a chunk, and members across chunk ends
	t.Cleanup(func() {
		objstore.SetCache("", 0)
		objstore.SetRetry(objstore.DefaultRetry)
		scanChunk = old
	})
	png, jpg := loadertest.Fixture(t, "img/rgb.png"), loadertest.Fixture(t, "img/rgb.jpg")
	b := srv.Bucket(t, "data")
	for k := range 3 {
		var ms []entry
		for i := range 12 {
			img := jpg
			if i%3 == 1 {
				img = png
			}
			key := fmt.Sprintf("s%d/%02d", k, i)
			if k == 1 && i == 5 {
				key = "s1/" + strings.Repeat("long", 30) // over 100 bytes: a PAX header
			}
			ms = append(ms, entry{name: key + ".jpg", data: img}, entry{name: key + ".cls", data: []byte(fmt.Sprint((k + i) % 4))})
		}
		if k == 2 { // a member larger than a scan chunk
			ms = append(ms, entry{name: "s2/11.json", data: bytes.Repeat([]byte("x"), 3*4096+100)})
		}
		p := filepath.Join(e.dir, fmt.Sprintf("train-%03d.tar", k))
		writeTar(t, p, ms...)
		e.shards = append(e.shards, p)
		srv.PutFile(t, b, "wds/"+filepath.Base(p), p)
	}
	e.url = "s3://data/wds/train-{000..002}.tar?endpoint=" + e.px.URL
	return e
}

// putSidecar uploads the sidecar of local shard `from` as object shard's.
func (e *remoteEnv) putSidecar(t *testing.T, from, shard int) {
	t.Helper()
	data, err := os.ReadFile(e.shards[from])
	if err != nil {
		t.Fatal(err)
	}
	idx, err := Index(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	e.srv.Put(t, "data", "wds/"+filepath.Base(e.shards[shard])+SidecarSuffix, idx)
}

func openT(t *testing.T, spec string) *source {
	t.Helper()
	s, err := open(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// sameSamples: b has a's samples (labels, classes, member names, pixels).
func sameSamples(t *testing.T, a, b *source) {
	t.Helper()
	la, pa := loadertest.Samples(t, a)
	lb, pb := loadertest.Samples(t, b)
	if !slices.Equal(la, lb) || !slices.Equal(a.Classes(), b.Classes()) || len(pa) != len(pb) {
		t.Fatalf("labels %v / %v, classes %v / %v", la, lb, a.Classes(), b.Classes())
	}
	for i := range pa {
		_, ma, _ := strings.Cut(a.Name(int64(i)), "(")
		_, mb, _ := strings.Cut(b.Name(int64(i)), "(")
		if ma != mb || !bytes.Equal(pa[i], pb[i]) {
			t.Fatalf("sample %d: %s vs %s, pixels equal %v", i, a.Name(int64(i)), b.Name(int64(i)), bytes.Equal(pa[i], pb[i]))
		}
	}
}

func noFills(t *testing.T) {
	backgroundFills = false
	t.Cleanup(func() { backgroundFills = true })
}

// TestRemoteIndexMatches: for every shard the sidecar, the header scan by
// ranged reads and the local index are the same members; and a dataset
// opened from sidecars, from scans and from local files reads the same
// samples, all of them ranged reads while the cache is empty.
func TestRemoteIndexMatches(t *testing.T) {
	e := newRemoteEnv(t)
	noFills(t)
	for k, p := range e.shards {
		data, _ := os.ReadFile(p)
		local, err := indexTar(bytes.NewReader(data), int64(len(data)), true)
		if err != nil {
			t.Fatal(err)
		}
		idx, err := Index(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		side, err := parseIndex(idx, int64(len(data)), "")
		if err != nil || !sameMembers(local, side) {
			t.Fatalf("shard %d: sidecar differs from the local index (%v)", k, err)
		}
		set, err := objstore.Open(t.Context(), "s3://data/wds/"+filepath.Base(p), ".tar", objstore.Options{Endpoint: e.px.URL})
		if err != nil {
			t.Fatal(err)
		}
		r := &chunkReader{ctx: t.Context(), set: set, size: int64(len(data))}
		scan, err := indexTar(r, int64(len(data)), true)
		set.Close()
		if err != nil || !sameMembers(local, scan) {
			t.Fatalf("shard %d: the scan differs from the local index (%v)", k, err)
		}
		if r.gets < 2 || int64(r.gets) > int64(len(data))/scanChunk+2 {
			t.Fatalf("shard %d: the scan took %d GETs for %d bytes in chunks of %d", k, r.gets, len(data), scanChunk)
		}
	}
	local := openT(t, e.dir)
	scanned := openT(t, e.url)
	if !slices.Equal(scanned.indexedBy, []string{"scan", "scan", "scan"}) {
		t.Fatalf("indexed by %v", scanned.indexedBy)
	}
	sameSamples(t, local, scanned)
	for k := range e.shards {
		e.putSidecar(t, k, k)
	}
	gets := e.px.Count("GET", 0)
	side := openT(t, e.url)
	if !slices.Equal(side.indexedBy, []string{"sidecar", "sidecar", "sidecar"}) {
		t.Fatalf("indexed by %v", side.indexedBy)
	}
	if n := e.px.Count("GET", 0) - gets; n != 3+1 {
		t.Fatalf("opening with sidecars took %d GETs, want 4 (3 sidecars, sample 0 for the image size)", n)
	}
	sameSamples(t, local, side)
	if e.srv.Root == "" || side.shards[0].rem.mapped.Load() != nil {
		t.Fatal("a shard was mapped without a fill")
	}
}

// TestRemoteStaleSidecar: a sidecar of another size or MD5 is ignored with
// a log line naming it, and the shard's headers are read instead; one that
// passes those checks but points elsewhere fails its samples (ErrCorrupt)
// rather than decode the wrong bytes.
func TestRemoteStaleSidecar(t *testing.T) {
	e := newRemoteEnv(t)
	noFills(t)
	var logs bytes.Buffer
	var mu sync.Mutex
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })

	e.putSidecar(t, 0, 1) // shard 0's index as shard 1's: another size
	// Shard 2's index with its size but another MD5.
	data, _ := os.ReadFile(e.shards[2])
	idx, _ := Index(bytes.NewReader(data), int64(len(data)))
	idx = regexp.MustCompile(`md5 [0-9a-f]{32}`).ReplaceAll(idx, []byte("md5 "+strings.Repeat("0", 32)))
	e.srv.Put(t, "data", "wds/train-002.tar"+SidecarSuffix, idx)
	src := openT(t, e.url)
	if !slices.Equal(src.indexedBy, []string{"scan", "scan", "scan"}) {
		t.Fatalf("indexed by %v, want three scans", src.indexedBy)
	}
	mu.Lock()
	for _, want := range []string{"train-001.tar.idx", "train-002.tar.idx", "stale"} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("log %q lacks %q", logs.String(), want)
		}
	}
	mu.Unlock()
	sameSamples(t, openT(t, e.dir), src)

	// Right size and MD5, members shifted by one block: no header there.
	data, _ = os.ReadFile(e.shards[0])
	ms, _ := indexTar(bytes.NewReader(data), int64(len(data)), true)
	good, _ := Index(bytes.NewReader(data), int64(len(data)))
	md5 := strings.Fields(string(good))[5]
	for i := range ms {
		ms[i].off += 512
	}
	e.srv.Put(t, "data", "wds/train-000.tar"+SidecarSuffix, marshalIndex(int64(len(data)), md5, ms))
	e.srv.Delete(t, "data", "wds/train-001.tar"+SidecarSuffix)
	e.srv.Delete(t, "data", "wds/train-002.tar"+SidecarSuffix)
	bad, err := open(e.url)
	if err == nil {
		defer bad.Close()
		_, _, err = bad.Sample(3, make([]byte, bad.Spec().Bytes()))
	}
	if !errors.Is(err, loader.ErrCorrupt) || !strings.Contains(err.Error(), "index does not match") {
		t.Fatalf("a shifted sidecar: %v, want ErrCorrupt naming the index", err)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestRemoteReadFaults: ranged member reads ride out throttling, resets,
// cut and stalled bodies, and still give the right pixels; a read that
// keeps failing is an error naming the object and member.
func TestRemoteReadFaults(t *testing.T) {
	e := newRemoteEnv(t)
	noFills(t)
	for k := range e.shards {
		e.putSidecar(t, k, k)
	}
	local := openT(t, e.dir)
	src := openT(t, e.url)
	scratch := make([]byte, src.Spec().Bytes())
	want := make([]byte, src.Spec().Bytes())
	for i, f := range []s3test.Fault{s3test.SlowDown, s3test.Reset, s3test.Truncate, s3test.Stall, s3test.Hang} {
		e.px.Inject(f, 2, "GET", "train-001.tar")
		j := int64(12 + i)
		_, pw, _ := local.Sample(j, want)
		_, pg, err := src.Sample(j, scratch)
		if err != nil || !bytes.Equal(pg, pw) {
			t.Fatalf("%v: sample %d: %v, pixels equal %v", f, j, err, bytes.Equal(pg, pw))
		}
		if n := e.px.Count("GET", f); n != 2 {
			t.Fatalf("%v: %d faults met, want 2", f, n)
		}
	}
	e.px.Inject(s3test.SlowDown, 100, "GET", "train-002.tar")
	_, _, err := src.Sample(30, scratch)
	var oe *objstore.Error
	if !errors.As(err, &oe) || !strings.Contains(err.Error(), "s3://data/wds/train-002.tar") {
		t.Fatalf("persistent throttling: %v, want an objstore error naming the object", err)
	}
}

// TestRemoteFillsAndPrefetch: the background fills put every shard in the
// cache (verified; nothing partial), the shards asked for by Prefetch
// first; then samples come from the mapped cache files, and a second open
// reads no sidecar and no header from the server.
func TestRemoteFillsAndPrefetch(t *testing.T) {
	e := newRemoteEnv(t)
	src := openT(t, e.url)
	src.Prefetch([]int64{30, 31}) // shard 2
	deadline := time.Now().Add(30 * time.Second)
	for k := range src.shards {
		for src.shards[k].rem.mapped.Load() == nil {
			if time.Now().After(deadline) {
				t.Fatalf("shard %d not cached after 30 s", k)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	sameSamples(t, openT(t, e.dir), src)
	gets := e.px.Count("GET", 0)
	again := openT(t, e.url)
	if !slices.Equal(again.indexedBy, []string{"cache", "cache", "cache"}) || e.px.Count("GET", 0) != gets+0 {
		t.Fatalf("second open: indexed by %v, %d GETs", again.indexedBy, e.px.Count("GET", 0)-gets)
	}
	if again.shards[1].rem.mapped.Load() == nil {
		t.Fatal("a cached shard is not mapped at open")
	}
}

// TestOrderOption: order=shards[:W] gives the sampler a shard order over
// the dataset's shard runs; anything else is refused.
func TestOrderOption(t *testing.T) {
	e := &remoteEnv{dir: t.TempDir()}
	jpg := loadertest.Fixture(t, "img/rgb.jpg")
	for k := range 3 {
		var ms []entry
		for i := range 5 + k {
			ms = append(ms, entry{name: fmt.Sprintf("%d-%d.jpg", k, i), data: jpg}, entry{name: fmt.Sprintf("%d-%d.cls", k, i), data: []byte("0")})
		}
		writeTar(t, filepath.Join(e.dir, fmt.Sprintf("t%d.tar", k)), ms...)
	}
	if s := openT(t, e.dir); s.ShardOrder() != nil {
		t.Fatal("uniform by default")
	}
	for spec, window := range map[string]int{"?order=shards": 4, "?order=shards:2": 2} {
		s := openT(t, e.dir+spec)
		o := s.ShardOrder()
		if o == nil || o.Window() != window || o.Count() != 3 || o.Len() != 18 {
			t.Fatalf("%s: %+v", spec, o)
		}
	}
	for _, bad := range []string{"?order=shard", "?order=shards:0", "?order=shards:x", "?index=scan"} {
		if _, err := open(e.dir + bad); err == nil {
			t.Fatalf("%s accepted", bad)
		}
	}
}
