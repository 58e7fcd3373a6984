package benchmarks

import (
	"context"
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/clienttest"
	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/cache"
)

// cacheStream is one of the streams sharing a dataset: its seed and
// augmentation, and a digest of everything it delivered.
type cacheStream struct {
	seed uint64
	ops  string
	sum  [sha256.Size]byte
}

// sweepStreams are four trainers of a sweep: different seeds, and
// different augmentations and output types, over one dataset.
var sweepStreams = []cacheStream{
	{seed: 1, ops: "crop=32:4,flip=0.5,normalize=cifar10,out=f32:chw"},
	{seed: 2, ops: "crop=32:4,flip=0.5,normalize=cifar10,out=f32:chw"},
	{seed: 3, ops: "crop=28,flip=0.5,normalize=cifar10,out=bf16:chw"},
	{seed: 4, ops: "crop=32:4,flip=0.5,out=u8:hwc"},
}

// progress counts the images delivered, and marks the moment the last
// stream begins its second epoch: from there on the cache is as full as
// it gets (the steady state).
type progress struct {
	images  atomic.Int64
	reached atomic.Int32 // streams past their first epoch

	at     time.Time
	cpu    time.Duration
	before int64 // images delivered before at
}

// runCacheStreams runs the streams at once on one pool of workers over
// src for epochs epochs (batches of 256), the consumers releasing each
// batch at once; with digest set, each stream hashes its indices, labels
// and bytes. It returns the images delivered.
func runCacheStreams(tb testing.TB, src loader.Source, streams []cacheStream, workers int, epochs int64, digest bool) int64 {
	return runCacheStreamsProgress(tb, src, streams, workers, epochs, digest, new(progress))
}

func runCacheStreamsProgress(tb testing.TB, src loader.Source, streams []cacheStream, workers int, epochs int64, digest bool, p *progress) int64 {
	pool := loader.NewPool(workers)
	defer pool.Close()
	var wg sync.WaitGroup
	errs := make(chan error, len(streams))
	for k := range streams {
		s := &streams[k]
		ops, err := augment.ParseOps(s.ops)
		if err != nil {
			tb.Fatal(err)
		}
		pipe, err := augment.NewPipeline(src.Spec(), ops...)
		if err != nil {
			tb.Fatal(err)
		}
		l, err := loader.New(pool, loader.Config{Source: src, Pipeline: pipe, World: 1, Seed: s.seed, Shuffle: true,
			BatchSize: batchSize, Epochs: epochs})
		if err != nil {
			tb.Fatal(err)
		}
		wg.Go(func() {
			defer l.Close()
			var h hash.Hash
			if digest {
				h = sha256.New()
			}
			second := false
			for {
				b, err := l.Next(context.Background())
				if err == io.EOF {
					break
				}
				if err != nil {
					errs <- err
					return
				}
				if h != nil {
					fmt.Fprint(h, b.Epoch, b.Index, b.Indices, b.Labels)
					h.Write(b.Data)
				}
				if !second && b.Epoch > 0 {
					second = true
					if int(p.reached.Add(1)) == len(streams) {
						p.at, p.cpu, p.before = time.Now(), clienttest.CPUTime(), p.images.Load()
					}
				}
				p.images.Add(int64(b.Len()))
				b.Release()
			}
			if h != nil {
				h.Sum(s.sum[:0])
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
	return p.images.Load()
}

// TestCacheSameBatches: four streams of a sweep over the real CIFAR-10
// JPEGs (the 2,500 held out by holdout=250, to stay quick), two epochs,
// deliver the same batches, byte for byte, without a cache, with a cache
// of the whole part and with one of half of it.
func TestCacheSameBatches(t *testing.T) {
	if _, err := os.Stat(cifarJPEGTar); err != nil {
		t.Skipf("skipped: %v (the real CIFAR-10 JPEGs)", err)
	}
	base := "tar:" + cifarJPEGTar + "?holdout=250&part=val"
	var want []cacheStream
	for _, opts := range []string{"", "&cache=decoded", "&cache=decoded&cache_bytes=" + fmt.Sprint(1250*3072)} {
		src, err := cache.Open(base + opts)
		if err != nil {
			t.Fatal(err)
		}
		got := append([]cacheStream(nil), sweepStreams...)
		if n := runCacheStreams(t, src, got, 2, 2, true); n != 4*2*2500 {
			t.Fatalf("%s: %d images, want 20,000", opts, n)
		}
		if c, ok := src.(*cache.Cache); ok {
			if s := c.Stats(); s.Hits == 0 || s.Entries != s.Capacity/3072 {
				t.Errorf("%s: %+v, want hits and a full cache", opts, s)
			}
		}
		src.Close()
		if want == nil {
			want = got
			continue
		}
		for k := range got {
			if got[k].sum != want[k].sum {
				t.Errorf("%s: stream %d (seed %d, %s) differs from the stream without a cache", opts, k, got[k].seed, got[k].ops)
			}
		}
	}
}

// cacheBaseline is the run without a cache, for the runs with one to
// compare against in the same benchmark run.
var cacheBaseline struct{ imagesPerSec, cpuPerImage, steadyPerSec float64 }

// benchCache measures four streams of a sweep (sweepStreams) over the
// real CIFAR-10 JPEG tar, 5 epochs each, on one pool of 2 workers, opened
// with opts (the cache's, or none): one iteration is the whole run, the
// cache filled from empty within it. images/s is the four streams'
// total, and steady-images/s the same from the moment the last stream
// began its second epoch; cpu-µs/image is the process's CPU time per
// image (what counts on a machine shared with other work). The x-…-vs-none
// metrics compare them with the run without a cache.
func benchCache(b *testing.B, opts string) {
	needJPEGTar(b)
	const epochs = 5
	var images, steadyImages int64
	var wall, cpu, steadyWall, steadyCPU time.Duration
	var stats cache.Stats
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		src, err := cache.Open("tar:" + cifarJPEGTar + opts)
		if err != nil {
			b.Fatal(err)
		}
		streams := append([]cacheStream(nil), sweepStreams...)
		p := new(progress)
		b.StartTimer()
		c0, t0 := clienttest.CPUTime(), time.Now()
		n := runCacheStreamsProgress(b, src, streams, 2, epochs, false, p)
		t1, c1 := time.Now(), clienttest.CPUTime()
		images, wall, cpu = images+n, wall+t1.Sub(t0), cpu+c1-c0
		steadyImages, steadyWall, steadyCPU = steadyImages+n-p.before, steadyWall+t1.Sub(p.at), steadyCPU+c1-p.cpu
		b.StopTimer()
		if c, ok := src.(*cache.Cache); ok {
			stats = c.Stats()
		}
		src.Close()
		b.StartTimer()
	}
	b.SetBytes(images / int64(b.N) * 3072) // decoded u8 pixels per run
	rate, perImage := float64(images)/wall.Seconds(), float64(cpu.Microseconds())/float64(images)
	steady := float64(steadyImages) / steadyWall.Seconds()
	b.ReportMetric(rate, "images/s")
	b.ReportMetric(perImage, "cpu-µs/image")
	b.ReportMetric(steady, "steady-images/s")
	b.ReportMetric(float64(steadyCPU.Microseconds())/float64(steadyImages), "steady-cpu-µs/image")
	if stats.Hits+stats.Misses > 0 {
		b.ReportMetric(float64(stats.Hits)/float64(stats.Hits+stats.Misses), "hit-rate")
	}
	if opts == "" {
		cacheBaseline.imagesPerSec, cacheBaseline.cpuPerImage, cacheBaseline.steadyPerSec = rate, perImage, steady
	} else if cacheBaseline.imagesPerSec > 0 {
		b.ReportMetric(rate/cacheBaseline.imagesPerSec, "x-vs-none")
		b.ReportMetric(cacheBaseline.cpuPerImage/perImage, "x-cpu-vs-none")
		b.ReportMetric(steady/cacheBaseline.steadyPerSec, "x-steady-vs-none")
	}
}

// BenchmarkCache: a sweep's four streams over one dataset with the
// decoded cache (all of CIFAR-10's 50,000 images: 154 MB; and half of it)
// against without. Target: ≥ 3× the images/s without. Run with the test
// that the batches are the same:
//
//	go test ./benchmarks/ -run CacheSameBatches -bench Cache -benchtime 1x
func BenchmarkCache(b *testing.B) {
	b.Run("src=tar-jpeg/streams=4/epochs=5/cache=none/workers=2", func(b *testing.B) { benchCache(b, "") })
	b.Run("src=tar-jpeg/streams=4/epochs=5/cache=decoded/workers=2", func(b *testing.B) { benchCache(b, "?cache=decoded") })
	b.Run("src=tar-jpeg/streams=4/epochs=5/cache=decoded-half/workers=2", func(b *testing.B) {
		benchCache(b, "?cache=decoded&cache_bytes="+fmt.Sprint(25000*3072))
	})
}
