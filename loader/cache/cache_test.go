package cache_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/cache"
	"github.com/loaderd/loaderd/loader/format/synthetic"
	"github.com/loaderd/loaderd/sampler"
)

// TestCacheServesSourcePixels reads every sample twice, in two shuffled
// orders, through caches of several sizes: each read equals the source's,
// the cache admits samples until it is full and then keeps them (static
// admission), and the second pass hits exactly the cached ones.
func TestCacheServesSourcePixels(t *testing.T) {
	const n, size = 300, 32 * 32 * 3
	for _, tc := range []struct {
		name  string
		bytes int64
		want  int64 // entries once every sample was read
	}{
		{"whole", 0, n},
		{"larger", 10 * n * size, n},
		{"half", n / 2 * size, n / 2},
		{"ragged", 7*size + 100, 7},
		{"one", size, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref := synthetic.New(n, 3)
			c, err := cache.New(synthetic.New(n, 3), cache.Config{Bytes: tc.bytes})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			want, got := make([]byte, size), make([]byte, size)
			rng := rand.New(rand.NewPCG(1, 2))
			for pass := range 2 {
				before := c.Stats()
				for _, i := range rng.Perm(n) {
					wl, wp, _ := ref.Sample(int64(i), want)
					gl, gp, err := c.Sample(int64(i), got)
					if err != nil || gl != wl || !bytes.Equal(gp, wp) {
						t.Fatalf("pass %d sample %d: label %d err %v, want label %d; pixels equal: %v", pass, i, gl, err, wl, bytes.Equal(gp, wp))
					}
				}
				s := c.Stats()
				if s.Entries != tc.want || s.Bytes != tc.want*size || s.Evictions != 0 || s.Len != n {
					t.Fatalf("pass %d: %+v, want %d entries of %d bytes", pass, s, tc.want, size)
				}
				if hits := s.Hits - before.Hits; pass == 1 && hits != tc.want {
					t.Fatalf("second pass: %d hits, want one per cached sample (%d)", hits, tc.want)
				}
				if s.Hits+s.Misses != int64(n*(pass+1)) {
					t.Fatalf("pass %d: %d hits + %d misses for %d reads", pass, s.Hits, s.Misses, n*(pass+1))
				}
			}
			if r := c.Reserved(); r != c.Stats().Capacity+c.Overhead() || c.Stats().Capacity < tc.want*size {
				t.Fatalf("reserved %d for %+v", r, c.Stats())
			}
		})
	}
}

// TestCacheConcurrentReaders: workers reading random samples at once all
// get the source's pixels, whoever admitted them (run it with -race: the
// publication of an entry is what it checks).
func TestCacheConcurrentReaders(t *testing.T) {
	const n, size = 500, 32 * 32 * 3
	reads := int64(4000)
	if raceEnabled {
		reads = 1000
	}
	ref := synthetic.New(n, 5)
	c, err := cache.New(synthetic.New(n, 5), cache.Config{Bytes: n * 3 / 4 * size})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			want, got := make([]byte, size), make([]byte, size)
			for range reads {
				i := rng.Int64N(n)
				wl, wp, _ := ref.Sample(i, want)
				gl, gp, err := c.Sample(i, got)
				if err != nil || gl != wl || !bytes.Equal(gp, wp) {
					errs <- fmt.Errorf("worker %d sample %d: label %d (want %d), err %v", w, i, gl, wl, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if s := c.Stats(); s.Entries != n*3/4 || s.Hits+s.Misses != 4*reads {
		t.Fatalf("%+v: want %d entries and %d reads", s, n*3/4, 4*reads)
	}
}

// flaky fails sample bad until it was asked for it fails times.
type flaky struct {
	loader.Source
	bad   int64
	fails int
	calls int
}

var errFlaky = errors.New("flaky")

func (f *flaky) Sample(i int64, scratch []byte) (int32, []byte, error) {
	if i == f.bad && f.calls < f.fails {
		f.calls++
		return 0, nil, &loader.RecordError{File: "flaky", Record: i, Err: errFlaky}
	}
	return f.Source.Sample(i, scratch)
}

// TestCacheErrorsNotCached: a sample that fails fails every time it is
// read, with the source's error, until the source reads it; then it is
// cached like any other.
func TestCacheErrorsNotCached(t *testing.T) {
	f := &flaky{Source: synthetic.New(10, 1), bad: 4, fails: 3}
	c, err := cache.New(f, cache.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 3072)
	for k := range 3 {
		if _, _, err := c.Sample(4, buf); !errors.Is(err, errFlaky) {
			t.Fatalf("read %d: err %v, want the source's", k, err)
		}
	}
	if s := c.Stats(); s.Entries != 0 || s.Misses != 3 {
		t.Fatalf("after 3 errors: %+v", s)
	}
	for k := range 2 {
		if _, _, err := c.Sample(4, buf); err != nil {
			t.Fatalf("read %d after the errors: %v", k, err)
		}
	}
	if s := c.Stats(); s.Entries != 1 || s.Hits != 1 || s.Misses != 4 {
		t.Fatalf("after two good reads: %+v, want 1 entry, 1 hit, 4 misses", s)
	}
	if _, _, err := c.Sample(10, buf); !errors.Is(err, loader.ErrIndex) {
		t.Fatalf("index 10 of 10: %v, want ErrIndex", err)
	}
}

// faulty returns, the first time, a view of a mapping nobody may read (as
// a CIFAR file truncated under its mapping would be), then good pixels.
type faulty struct {
	loader.Source
	bad   []byte
	calls int
}

func (f *faulty) Sample(i int64, scratch []byte) (int32, []byte, error) {
	f.calls++
	if f.calls == 1 {
		return 0, f.bad[:len(scratch)], nil
	}
	return f.Source.Sample(i, scratch)
}

// catchFault runs fn with faults turned into panics, and returns the
// fault's address, or 0.
func catchFault(fn func()) (addr uintptr) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			fa, ok := r.(interface{ Addr() uintptr })
			if !ok {
				panic(r)
			}
			addr = fa.Addr()
		}
	}()
	fn()
	return 0
}

// TestCacheFaultWhileFilling: a fault copying a source's view into the
// arena reaches the caller (the loader's fault guard turns it into
// ErrFault) and leaves the entry empty, so the next good read caches it.
func TestCacheFaultWhileFilling(t *testing.T) {
	bad, err := unix.Mmap(-1, 0, 4096, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(bad)
	f := &faulty{Source: synthetic.New(4, 1), bad: bad}
	c, err := cache.New(f, cache.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 3072)
	start := uintptr(unsafe.Pointer(&bad[0]))
	if addr := catchFault(func() { c.Sample(2, buf) }); addr < start || addr >= start+4096 {
		t.Fatalf("fault at %#x (0: none), want one in the source's view at %#x", addr, start)
	}
	_, want, _ := synthetic.New(4, 1).Sample(2, make([]byte, 3072))
	for k := range 2 {
		_, pix, err := c.Sample(2, buf)
		if err != nil || !bytes.Equal(pix, want) {
			t.Fatalf("read %d after the fault: err %v, pixels equal %v", k, err, bytes.Equal(pix, want))
		}
	}
	if s := c.Stats(); s.Entries != 1 || s.Hits != 1 {
		t.Fatalf("%+v: the entry should have been cached after the fault", s)
	}
}

// TestCacheClose: after Close reads fail with ErrClosed, and a view kept
// from before faults (inside the arena, which stays reserved) instead of
// reading memory that something else now owns.
func TestCacheClose(t *testing.T) {
	c, err := cache.New(synthetic.New(8, 1), cache.Config{})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 3072)
	c.Sample(3, buf)
	_, view, err := c.Sample(3, buf)
	if err != nil || &view[0] == &buf[0] {
		t.Fatalf("second read of 3: err %v, or not a view of the cache", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Sample(3, buf); !errors.Is(err, loader.ErrClosed) {
		t.Fatalf("read after Close: %v, want ErrClosed", err)
	}
	var sink byte
	if addr := catchFault(func() { sink = view[100] }); addr != uintptr(unsafe.Pointer(&view[100])) {
		t.Fatalf("reading a view after Close: fault at %#x (0: none), want one at %p (read %d)", addr, &view[100], sink)
	}
	runtime.KeepAlive(c)
}

// TestNewErrors: sizes the cache cannot honour are refused, saying why.
func TestNewErrors(t *testing.T) {
	for _, tc := range []struct {
		src   loader.Source
		bytes int64
		want  string
	}{
		{synthetic.New(10, 1), 100, "holds no sample"},
		{synthetic.New(10, 1), -1, "negative"},
		{&sizedSource{n: 3}, 0, "need cache_bytes"},
	} {
		c, err := cache.New(tc.src, cache.Config{Bytes: tc.bytes})
		if !errors.Is(err, cache.ErrConfig) || !bytes.Contains([]byte(err.Error()), []byte(tc.want)) {
			t.Errorf("%s with %d bytes: %v, want ErrConfig saying %q", tc.src, tc.bytes, err, tc.want)
		}
		if c != nil {
			c.Close()
		}
	}
}

// TestCacheAllocs: neither a hit nor a miss allocates.
func TestCacheAllocs(t *testing.T) {
	const n = 1000
	c, err := cache.New(synthetic.New(n, 1), cache.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 3072)
	next := int64(0)
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	if a := testing.AllocsPerRun(200, func() { c.Sample(next, buf); next++ }); a != 0 {
		t.Errorf("miss: %v allocations per sample", a)
	}
	if a := testing.AllocsPerRun(200, func() { next--; c.Sample(next, buf) }); a != 0 {
		t.Errorf("hit: %v allocations per sample", a)
	}
	if s := c.Stats(); s.Hits < 200 || s.Misses < 200 {
		t.Fatalf("%+v: the runs did not take both paths", s)
	}
	s := &sizedSource{n: 50}
	sc, err := cache.New(s, cache.Config{Bytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	big := make([]byte, s.MaxPixels()*3)
	k := int64(0)
	one := scaler(1)
	if a := testing.AllocsPerRun(40, func() { sc.SampleSized(k%50, big, &one); k++ }); a != 0 {
		t.Errorf("sized miss and hit: %v allocations per sample", a)
	}
}

// sizedSource is a loader.SizedSource whose sample i is an image of
// 8+i%5 × 6+i%7 pixels, which it can also give at DCT scale 2 (every
// other pixel: not what full size gives, as with a real scaled decode).
type sizedSource struct {
	n     int64
	calls int
}

func (s *sizedSource) Len() int64 { return s.n }
func (s *sizedSource) Spec() augment.Spec {
	return augment.Spec{C: 3, DType: sample.U8, Layout: sample.HWC}
}
func (s *sizedSource) Classes() []string { return []string{"a", "b"} }
func (s *sizedSource) String() string    { return "sized:" + fmt.Sprint(s.n) }
func (s *sizedSource) Close() error      { return nil }
func (s *sizedSource) MaxPixels() int64  { return 12 * 12 }
func (s *sizedSource) Sample(i int64, scratch []byte) (int32, []byte, error) {
	l, p, _, err := s.SampleSized(i, scratch, nil)
	return l, p, err
}
func (s *sizedSource) SampleSized(i int64, scratch []byte, want loader.Scaler) (int32, []byte, loader.Decoded, error) {
	s.calls++
	if i < 0 || i >= s.n {
		return 0, nil, loader.Decoded{}, &loader.RecordError{File: s.String(), Record: i, Err: loader.ErrIndex}
	}
	h, w, d := 8+int(i%5), 6+int(i%7), 1
	var ask loader.Want
	if want != nil {
		ask = want.Want(h, w)
		d = max(ask.Scale, 1)
	}
	sh, sw := augment.ScaledSize(h, w, d)
	if box := ask.Crop; d == 1 && box.W > 0 && box.H > 0 {
		// Decode-and-crop: a distinct pattern, the box's size.
		pix := scratch[:int(box.W)*int(box.H)*3]
		for k := range pix {
			pix[k] = byte(int(i)*13 + k*5 + 1)
		}
		return int32(i % 2), pix, loader.Decoded{H: h, W: w, Scale: 1, Box: box}, nil
	}
	pix := scratch[:sh*sw*3]
	for k := range pix {
		pix[k] = byte(int(i)*31 + k*d*7)
	}
	return int32(i % 2), pix, loader.WholeImage(h, w, d), nil
}

// scaler asks for one DCT scale for every image.
type scaler int

func (s *scaler) Want(h, w int) loader.Want { return loader.Want{Scale: int(*s)} }

// cropBox is the box cropper asks for.
var cropBox = sample.Box{X: 1, Y: 1, W: 2, H: 3}

// cropper asks for full size and a 2×3 box of every image.
type cropper struct{}

func (cropper) Want(h, w int) loader.Want { return loader.Want{Scale: 1, Crop: cropBox} }

// TestCacheSizedCrop: a caller that takes crops (a random resized crop)
// still fills the cache with whole images, and is served them from it;
// once the cache is full, misses get the source's crop.
func TestCacheSizedCrop(t *testing.T) {
	ref, src := &sizedSource{n: 40}, &sizedSource{n: 40}
	c, err := cache.New(src, cache.Config{Bytes: 40 * 10 * 3 * 3})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want, got := make([]byte, 12*12*3), make([]byte, 12*12*3)
	for pass := range 2 {
		for i := range int64(40) {
			_, gp, gd, err := c.SampleSized(i, got, cropper{})
			if err != nil {
				t.Fatal(err)
			}
			_, wp, _, _ := ref.SampleSized(i, want, nil)
			if !gd.Whole() && gd.Box != cropBox || gd.Scale != 1 {
				t.Fatalf("pass %d sample %d: %+v, neither the image nor the crop", pass, i, gd)
			}
			if gd.Whole() && !bytes.Equal(gp, wp) {
				t.Fatalf("pass %d sample %d: the whole image differs from the source's", pass, i)
			}
		}
	}
	if s := c.Stats(); s.Entries == 0 || s.Hits == 0 {
		t.Fatalf("%+v: a cropping caller left the cache empty", s)
	}
}

// TestCacheSized: images of varying size are cached at full size, each in
// its own length; a read at full size is served from the cache, one at a
// DCT scale goes to the source, and both equal the source's.
func TestCacheSized(t *testing.T) {
	ref, src := &sizedSource{n: 40}, &sizedSource{n: 40}
	var total int64
	for i := range int64(40) {
		total += int64(8+i%5) * int64(6+i%7) * 3
	}
	c, err := cache.New(src, cache.Config{Bytes: total / 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want, got := make([]byte, 12*12*3), make([]byte, 12*12*3)
	for pass := range 3 {
		for i := range int64(40) {
			for _, d := range []scaler{1, 2} {
				wl, wp, wdec, _ := ref.SampleSized(i, want, &d)
				gl, gp, gdec, err := c.SampleSized(i, got, &d)
				if err != nil || gl != wl || gdec != wdec || !bytes.Equal(gp, wp) {
					t.Fatalf("pass %d sample %d scale %d: %d %+v err %v, want %d %+v; pixels equal %v",
						pass, i, d, gl, gdec, err, wl, wdec, bytes.Equal(gp, wp))
				}
			}
		}
	}
	s := c.Stats()
	if s.Entries == 0 || s.Entries == 40 || s.Bytes > total/2 || s.Hits == 0 {
		t.Fatalf("%+v: want a half-full cache of varying entries (%d bytes for all)", s, total)
	}
	// Every cached image is served at full size without the source.
	calls, hits := src.calls, s.Hits
	for i := range int64(40) {
		c.Sample(i, got)
	}
	if s2 := c.Stats(); int64(src.calls-calls) != 40-s.Entries || s2.Hits-hits != s.Entries {
		t.Fatalf("full-size pass: %d source reads, %d hits; want %d and %d", src.calls-calls, s2.Hits-hits, 40-s.Entries, s.Entries)
	}
}

// sharded is a source with a shard-shuffle order that records prefetches.
type sharded struct {
	loader.Source
	order *sampler.Shards
	got   []int64
}

func (s *sharded) ShardOrder() *sampler.Shards { return s.order }
func (s *sharded) Prefetch(idx []int64)        { s.got = append(s.got, idx...) }

// TestCachePassesShardOrder: a cached remote tar keeps ?order=shards and
// its prefetch, since the loader only sees the cache.
func TestCachePassesShardOrder(t *testing.T) {
	order, err := sampler.NewShards([]sampler.Run{{Start: 0, Len: 5, Shard: 0}, {Start: 5, Len: 5, Shard: 1}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	src := &sharded{Source: synthetic.New(10, 1), order: order}
	c, err := cache.New(src, cache.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var src2 loader.Source = c
	so, ok := loader.As[loader.ShardOrderer](src2)
	if !ok || so.ShardOrder() != order {
		t.Fatalf("cache hides the source's shard order")
	}
	pf, ok := loader.As[loader.Prefetcher](src2)
	if !ok {
		t.Fatal("cache is not a Prefetcher")
	}
	pf.Prefetch([]int64{3, 7})
	if len(src.got) != 2 || src.got[0] != 3 || src.got[1] != 7 {
		t.Errorf("source saw prefetch %v, want [3 7]", src.got)
	}
	plain, err := cache.New(synthetic.New(10, 1), cache.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, ok := loader.As[loader.ShardOrderer](plain); ok || plain.ShardOrder() != nil {
		t.Error("a source without shards got an order")
	}
}
