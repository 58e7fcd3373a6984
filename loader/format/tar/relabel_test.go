package tar

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/internal/loadertest"
	"github.com/loaderd/loaderd/loader/objstore"
	"github.com/loaderd/loaderd/loader/objstore/s3test"
)

// The sidecar tests: a sidecar with the right size and MD5 whose member
// names are wrong (two equal-size images swapped) must not relabel
// samples served by ranged reads.

// flatPNG is an uncompressed 8x8 PNG of one colour: every one has the same
// byte size, so swapping two of them keeps every offset and size valid.
func flatPNG(t *testing.T, c color.NRGBA) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, 8, 8))
	for i := 0; i < len(img.Pix); i += 4 {
		img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = c.R, c.G, c.B, 255
	}
	var b bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.NoCompression}).Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// swappedEnv: shards as local files and as objects s3://data/sw/….
type swappedEnv struct {
	srv    *s3test.Server
	dir    string
	shards []string
	keys   [][]string // per shard, the image member names
	url    string
}

// wdsShards: n WebDataset shards of 10 samples (distinct colours, labels
// i%5; sample 4's key is a PAX long name).
func wdsShards(t *testing.T, n int) [][]entry {
	var shards [][]entry
	for k := range n {
		var ms []entry
		for i := range 10 {
			key := fmt.Sprintf("s%d/%02d", k, i)
			if i == 4 {
				key = fmt.Sprintf("s%d/%s", k, strings.Repeat("long", 30)) // over 100 bytes: a PAX header
			}
			img := flatPNG(t, color.NRGBA{R: uint8(25 * i), G: uint8(80 * k), B: uint8(255 - 20*i)})
			ms = append(ms, entry{name: key + ".png", data: img}, entry{name: key + ".cls", data: []byte(fmt.Sprint(i % 5))})
		}
		shards = append(shards, ms)
	}
	return shards
}

func newSwappedEnv(t *testing.T, shards [][]entry) *swappedEnv {
	t.Helper()
	srv := s3test.Start(t)
	e := &swappedEnv{srv: srv, dir: t.TempDir()}
	objstore.SetCache(t.TempDir(), 0)
	old := scanChunk
	scanChunk = 4096
	t.Cleanup(func() {
		objstore.SetCache("", 0)
		scanChunk = old
	})
	b := srv.Bucket(t, "data")
	for k, ms := range shards {
		var keys []string
		for _, m := range ms {
			if strings.HasSuffix(m.name, ".png") {
				keys = append(keys, m.name)
			}
		}
		p := filepath.Join(e.dir, fmt.Sprintf("sw-%03d.tar", k))
		writeTar(t, p, ms...)
		e.shards = append(e.shards, p)
		e.keys = append(e.keys, keys)
		srv.PutFile(t, b, "sw/"+filepath.Base(p), p)
	}
	e.url = fmt.Sprintf("s3://data/sw/sw-{000..%03d}.tar?endpoint=%s", len(shards)-1, srv.Endpoint)
	return e
}

// putSidecar uploads shard k's sidecar with edit applied to its members.
func (e *swappedEnv) putSidecar(t *testing.T, k int, edit func([]tarMember)) {
	t.Helper()
	data, err := os.ReadFile(e.shards[k])
	if err != nil {
		t.Fatal(err)
	}
	good, err := Index(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	ms, err := parseIndex(good, int64(len(data)), "")
	if err != nil {
		t.Fatal(err)
	}
	edit(ms)
	e.srv.Put(t, "data", "sw/"+filepath.Base(e.shards[k])+SidecarSuffix, marshalIndex(int64(len(data)), strings.Fields(string(good))[5], ms))
}

// swapNames swaps the names of members a and b (and nothing else).
func swapNames(a, b string) func([]tarMember) {
	return func(ms []tarMember) {
		var ia, ib = -1, -1
		for i := range ms {
			switch ms[i].name {
			case a:
				ia = i
			case b:
				ib = i
			}
		}
		if ia < 0 || ib < 0 || ms[ia].size != ms[ib].size {
			panic(fmt.Sprintf("swapNames %q %q: not two members of equal size", a, b))
		}
		ms[ia].name, ms[ib].name = ms[ib].name, ms[ia].name
	}
}

// captureLog sends the default logger (objstore.Logger's) to a buffer.
func captureLog(t *testing.T) func() string {
	var logs bytes.Buffer
	var mu sync.Mutex
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		return logs.String()
	}
}

// diffSamples counts the samples of b whose label, member name or pixels
// differ from a's.
func diffSamples(t *testing.T, a, b *source) (int, string) {
	t.Helper()
	if a.Len() != b.Len() {
		t.Fatalf("%d samples, local %d", b.Len(), a.Len())
	}
	scratch := make([]byte, a.Spec().Bytes())
	want := make([]byte, a.Spec().Bytes())
	n, first := 0, ""
	for i := range a.Len() {
		la, pa, err := a.Sample(i, want)
		if err != nil {
			t.Fatal(err)
		}
		lb, pb, err := b.Sample(i, scratch)
		if err != nil {
			t.Fatalf("sample %d (%s): %v", i, b.Name(i), err)
		}
		if la != lb || !bytes.Equal(pa, pb) {
			if n == 0 {
				first = fmt.Sprintf("sample %d %s: label %d, local %d; pixels equal %v", i, b.Name(i), lb, la, bytes.Equal(pa, pb))
			}
			n++
		}
	}
	return n, first
}

// TestRemoteSidecarSwappedNames: shard 0's sidecar swaps the names of two
// equal-size images, shard 1's those of an image with a PAX long name and
// a short one, shard 2's is right (and has a long name too). Read by
// ranged reads, every sample equals the local shard's; each bad sidecar
// is dropped with a log line naming the shard and the member, and
// counted once; the right one is not.
func TestRemoteSidecarSwappedNames(t *testing.T) {
	e := newSwappedEnv(t, wdsShards(t, 3))
	noFills(t)
	logs := captureLog(t)
	e.putSidecar(t, 0, swapNames(e.keys[0][2], e.keys[0][7]))
	e.putSidecar(t, 1, swapNames(e.keys[1][4], e.keys[1][6]))
	e.putSidecar(t, 2, func([]tarMember) {})
	before := SidecarsDropped()

	local := openT(t, e.dir)
	src := openT(t, e.url)
	if got := strings.Join(src.indexedBy, ","); got != "sidecar,sidecar,sidecar" {
		t.Fatalf("indexed by %s", got)
	}
	if n, first := diffSamples(t, local, src); n != 0 {
		t.Fatalf("%d of %d samples differ from the local shards' (first: %s); log:\n%s", n, local.Len(), first, logs())
	}
	if d := SidecarsDropped() - before; d != 2 {
		t.Fatalf("SidecarsDropped rose by %d, want 2 (shards 0 and 1); log:\n%s", d, logs())
	}
	log := logs()
	for _, want := range []string{"sw-000.tar", e.keys[0][2], "sw-001.tar", e.keys[1][4], "sidecar"} {
		if !strings.Contains(log, want) {
			t.Fatalf("log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "sw-002.tar") {
		t.Fatalf("the right sidecar of shard 2 was reported:\n%s", log)
	}
	// Its long name was checked from the PAX header a ranged read fetched,
	// without a re-index by the shard's headers.
	if idx := src.shards[2].rem.idx.Load(); idx.headers {
		t.Fatal("shard 2 was re-indexed by its headers: its long name did not check")
	}
	// A second pass reads the re-indexed shards: still right, nothing new.
	if n, first := diffSamples(t, local, src); n != 0 || SidecarsDropped()-before != 2 {
		t.Fatalf("second pass: %d differ (first: %s), %d dropped", n, first, SidecarsDropped()-before)
	}
}

// TestRemoteSidecarSwappedFill: with background fills on, a swapped
// sidecar is found when its shard's fill is indexed again, and the mapped
// cache file serves the right members; nothing fails.
func TestRemoteSidecarSwappedFill(t *testing.T) {
	e := newSwappedEnv(t, wdsShards(t, 1))
	logs := captureLog(t)
	e.putSidecar(t, 0, swapNames(e.keys[0][1], e.keys[0][8]))
	before := SidecarsDropped()
	src := openT(t, e.url)
	deadline := time.Now().Add(30 * time.Second)
	for src.shards[0].rem.mapped.Load() == nil && src.shards[0].rem.bad.Load() == nil {
		if time.Now().After(deadline) {
			t.Fatal("shard not cached after 30 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n, first := diffSamples(t, openT(t, e.dir), src); n != 0 {
		t.Fatalf("%d samples differ (first: %s); log:\n%s", n, first, logs())
	}
	if d := SidecarsDropped() - before; d != 1 || !strings.Contains(logs(), e.keys[0][1]) {
		t.Fatalf("SidecarsDropped rose by %d, want 1; log:\n%s", d, logs())
	}
}

// folderShards: two shards of the folder layout, classes a, b, c; every
// image of equal size, its colour its own.
func folderShards(t *testing.T) [][]entry {
	var shards [][]entry
	for k, names := range [][]string{{"a/0.png", "a/2.png", "b/0.png", "c/0.png"}, {"a/1.png", "b/1.png", "c/1.png"}} {
		var ms []entry
		for i, n := range names {
			ms = append(ms, entry{name: "train/" + n, data: flatPNG(t, color.NRGBA{R: uint8(40 * i), G: uint8(100 * k), B: 7})})
		}
		shards = append(shards, ms)
	}
	return shards
}

// TestRemoteSidecarFolderSwap: in the folder layout, where the path is the
// label, swapped names relabel two images; read by ranged reads, they do
// not, and a whole sample renamed within its shard is mended as well.
func TestRemoteSidecarFolderSwap(t *testing.T) {
	e := newSwappedEnv(t, folderShards(t))
	noFills(t)
	logs := captureLog(t)
	e.putSidecar(t, 0, swapNames("train/a/2.png", "train/c/0.png"))
	e.putSidecar(t, 1, func(ms []tarMember) {}) // right
	before := SidecarsDropped()
	local := openT(t, e.dir)
	src := openT(t, e.url)
	if n, first := diffSamples(t, local, src); n != 0 {
		t.Fatalf("%d of %d samples differ from the local shards' (first: %s); log:\n%s", n, local.Len(), first, logs())
	}
	sameSamples(t, local, src) // member names too
	if d := SidecarsDropped() - before; d != 1 || !strings.Contains(logs(), "sw-000.tar") {
		t.Fatalf("SidecarsDropped rose by %d, want 1; log:\n%s", d, logs())
	}
}

// TestRemoteSidecarUnmendable: a sidecar whose names, corrected, would
// move samples between shards (train/a/0.png named train/c/2.png: sample 0
// is shard 1's a/1 by the sidecar, shard 0's a/0 by the headers) cannot
// be mended without changing the dataset the sampler was given: the
// shard's samples fail with ErrCorrupt naming the shard and the member.
func TestRemoteSidecarUnmendable(t *testing.T) {
	e := newSwappedEnv(t, folderShards(t))
	noFills(t)
	logs := captureLog(t)
	e.putSidecar(t, 0, func(ms []tarMember) {
		for i := range ms {
			if ms[i].name == "train/a/0.png" {
				ms[i].name = "train/c/2.png"
			}
		}
	})
	before := SidecarsDropped()
	src := openT(t, e.url)
	scratch := make([]byte, src.Spec().Bytes())
	var err error
	for i := range src.Len() {
		if _, _, err = src.Sample(i, scratch); err != nil {
			break
		}
	}
	if !errors.Is(err, loader.ErrCorrupt) || !strings.Contains(err.Error(), "sw-000.tar") || !strings.Contains(err.Error(), "train/c/2.png") {
		t.Fatalf("samples: %v, want ErrCorrupt naming the shard and train/c/2.png", err)
	}
	if d := SidecarsDropped() - before; d != 1 || !strings.Contains(logs(), "cannot be mended") {
		t.Fatalf("SidecarsDropped rose by %d, want 1; log:\n%s", d, logs())
	}
	// By the sidecar, sample 1 is shard 0's train/a/2.png (fails now, with
	// its shard), sample 0 shard 1's train/a/1.png (read).
	if _, _, err := src.Sample(1, scratch); !errors.Is(err, loader.ErrCorrupt) {
		t.Fatalf("sample 1, of the unmendable shard 0: %v", err)
	}
	if _, _, err := src.Sample(0, scratch); err != nil {
		t.Fatalf("sample 0, of shard 1: %v", err)
	}
	labels, _ := loadertest.Samples(t, openT(t, e.dir)) // the local shards are fine
	if len(labels) != 7 {
		t.Fatalf("%d local samples", len(labels))
	}
}
