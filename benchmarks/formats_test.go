package benchmarks

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/loaderd/loaderd/client/clienttest"
	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/internal/convert"
)

// cifarJPEGTar is the real CIFAR-10 training split as 50,000 JPEGs.
const cifarJPEGTar = "../../shared/data/cifar10-train-jpg.tar"

var (
	arrowOnce sync.Once
	arrowDir  string
	arrowErr  error
)

// arrowData converts cifarData's CIFAR binary once into raw-pixel Arrow
// shards (HWC, as convert writes them), inside cifarData's directory so
// that TestMain removes both.
func arrowData(b *testing.B) string {
	dir := cifarData(b)
	arrowOnce.Do(func() {
		arrowDir = filepath.Join(dir, "arrow")
		_, arrowErr = convert.Run(context.Background(), convert.Options{From: "cifar:" + dir, To: "arrow:" + arrowDir, Shard: 10000})
	})
	if arrowErr != nil {
		b.Fatal(arrowErr)
	}
	return arrowDir
}

// withCPU runs a benchmark and also reports the process's CPU time per
// image (user + system, setup and warm-up included, so an upper bound):
// on a machine shared with other work, images/s measures the share this
// benchmark got, while cpu-µs/image says what 2 idle cores would give
// (2e6 / cpu-µs/image images/s).
func withCPU(b *testing.B, run func(*testing.B)) {
	cpu0 := clienttest.CPUTime()
	run(b)
	cpu := clienttest.CPUTime() - cpu0
	if b.N > 0 && !b.Skipped() {
		b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*batchSize), "cpu-µs/image")
	}
}

func needJPEGTar(b *testing.B) {
	if _, err := os.Stat(cifarJPEGTar); os.IsNotExist(err) {
		b.Skipf("skipped: %s is absent (the real CIFAR-10 JPEGs)", cifarJPEGTar)
	}
}

// BenchmarkFormats runs the whole data path (sampler, source, fused
// augmentation, pinned batches) over each format with 2 workers. Targets:
// tar of real JPEGs ≥ 60k images/s; Arrow raw pixels ≥ 90% of CIFAR binary.
//
//	go test ./benchmarks/ -run XXX -bench Formats -benchtime 3s
func BenchmarkFormats(b *testing.B) {
	b.Run("src=cifar/out=f32/workers=2", func(b *testing.B) {
		withCPU(b, func(b *testing.B) { benchPipeline(b, "cifar", 2, sample.F32) })
	})
	b.Run("src=arrow/out=f32/workers=2", func(b *testing.B) {
		dir := arrowData(b)
		withCPU(b, func(b *testing.B) { benchPipeline(b, "arrow:"+dir, 2, sample.F32) })
	})
	b.Run("src=tar-jpeg/out=f32/workers=2", func(b *testing.B) {
		needJPEGTar(b)
		withCPU(b, func(b *testing.B) { benchPipeline(b, "tar:"+cifarJPEGTar, 2, sample.F32) })
	})
	b.Run("src=tar-jpeg/out=f32/workers=1", func(b *testing.B) {
		needJPEGTar(b)
		withCPU(b, func(b *testing.B) { benchPipeline(b, "tar:"+cifarJPEGTar, 1, sample.F32) })
	})
}
