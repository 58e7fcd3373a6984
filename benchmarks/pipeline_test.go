package benchmarks

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/loader"
	_ "github.com/loaderd/loaderd/loader/format/all" // the benchmarks open any FORMAT:PATH
	"github.com/loaderd/loaderd/loader/format/synthetic"
)

const batchSize = 256

var (
	cifarOnce sync.Once
	cifarDir  string
	cifarErr  error
)

// cifarData writes a CIFAR-10-sized binary dataset (5 batches of 10,000
// records) once per run, from the synthetic source so no download is needed.
func cifarData(b *testing.B) string {
	cifarOnce.Do(func() {
		cifarDir, cifarErr = os.MkdirTemp("", "loaderd-bench-cifar")
		if cifarErr != nil {
			return
		}
		src := synthetic.New(50000, 1)
		rec := make([]byte, 3073)
		scratch := make([]byte, 3072)
		for f := 0; f < 5 && cifarErr == nil; f++ {
			buf := make([]byte, 0, 10000*len(rec))
			for i := int64(f * 10000); i < int64(f+1)*10000; i++ {
				label, pix, _ := src.Sample(i, scratch)
				rec[0] = byte(label)
				// HWC → CHW, as the CIFAR format stores it.
				for c := 0; c < 3; c++ {
					for p := 0; p < 1024; p++ {
						rec[1+c*1024+p] = pix[p*3+c]
					}
				}
				buf = append(buf, rec...)
			}
			cifarErr = os.WriteFile(filepath.Join(cifarDir, "data_batch_"+string(rune('1'+f))+".bin"), buf, 0o644)
		}
	})
	if cifarErr != nil {
		b.Fatal(cifarErr)
	}
	return cifarDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if cifarDir != "" {
		os.RemoveAll(cifarDir)
	}
	os.Exit(code)
}

// benchPipeline measures the whole data path: sampler → source → fused
// augmentation → pinned batch slots, with the consumer releasing each batch.
func benchPipeline(b *testing.B, spec string, workers int, out sample.DType) {
	step, sampleBytes := openPipeline(b, spec, workers, out)
	for range 8 { // fault in the source's pages and the scheduler
		step()
	}
	b.SetBytes(int64(batchSize * sampleBytes))
	b.ReportAllocs()
	start := time.Now()
	b.ResetTimer()
	for b.Loop() {
		step()
	}
	b.ReportMetric(float64(b.N*batchSize)/time.Since(start).Seconds(), "images/s")
}

// openPipeline starts an in-process Loader over spec with the CIFAR
// training recipe, closed when b ends; step takes and releases one batch.
func openPipeline(b *testing.B, spec string, workers int, out sample.DType) (step func(), sampleBytes int) {
	if spec == "cifar" {
		spec = "cifar:" + cifarData(b)
	}
	src, err := loader.Open(spec)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { src.Close() })
	pipe, err := augment.NewPipeline(src.Spec(), augment.CIFARTrain(out, sample.CHW)...)
	if err != nil {
		b.Fatal(err)
	}
	pool := loader.NewPool(workers)
	b.Cleanup(pool.Close)
	l, err := loader.New(pool, loader.Config{Source: src, Pipeline: pipe, World: 1, Seed: 1, Shuffle: true,
		BatchSize: batchSize, InFlight: 4})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() }) // cleanups run last-added first: the loader before its pool
	ctx := context.Background()
	return func() {
		bt, err := l.Next(ctx)
		if err != nil {
			b.Fatal(err)
		}
		bt.Release()
	}, pipe.Out().Bytes()
}

// benchCopyCeiling copies a batch's output bytes from memory already in
// use: no data path can write its batches faster than this.
func benchCopyCeiling(b *testing.B, out sample.DType) {
	n := batchSize * 3072 * out.Size()
	src, dst := make([]byte, n), make([]byte, n)
	b.SetBytes(int64(n))
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		copy(dst, src)
	}
	b.ReportMetric(float64(b.N*batchSize)/time.Since(start).Seconds(), "images/s")
}

func BenchmarkPipeline(b *testing.B) {
	b.Run("ceiling=memcpy/out=f32", func(b *testing.B) { benchCopyCeiling(b, sample.F32) })
	b.Run("src=cifar/out=f32/workers=1", func(b *testing.B) { benchPipeline(b, "cifar", 1, sample.F32) })
	b.Run("src=cifar/out=f32/workers=2", func(b *testing.B) { benchPipeline(b, "cifar", 2, sample.F32) })
	b.Run("src=cifar/out=u8/workers=2", func(b *testing.B) { benchPipeline(b, "cifar", 2, sample.U8) })
	b.Run("src=cifar/out=bf16/workers=2", func(b *testing.B) { benchPipeline(b, "cifar", 2, sample.BF16) })
	b.Run("src=synthetic/out=f32/workers=2", func(b *testing.B) { benchPipeline(b, "synthetic", 2, sample.F32) })
}
