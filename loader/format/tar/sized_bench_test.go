package tar

import (
	"context"
	"fmt"
	"testing"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/clienttest"
	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/imagedec"
	"github.com/loaderd/loaderd/loader/internal/loadertest"
)

// BenchmarkImageNetPipeline is the ImageNet training input: decode (turbo,
// at a DCT scale when the box allows) + random_resized_crop=224 + flip +
// normalize → f32 CHW, streamed from the large-image tar in batches of 64
// by 1 and 2 workers; one op is one image. python/examples/
// compare_imagenet.py runs torchvision's DataLoader on the same tar.
func BenchmarkImageNetPipeline(b *testing.B) {
	if err := imagedec.TurboAvailable(); err != nil {
		b.Skip(err)
	}
	p := loadertest.LargeImagesTar(b)
	src, err := loader.Open("tar:" + p + "?size=any&decoder=turbo")
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	ops, _ := augment.ParseOps("random_resized_crop=224,flip=0.5,normalize=imagenet,out=f32:chw")
	pipe, err := augment.NewPipeline(src.Spec(), ops...)
	if err != nil {
		b.Fatal(err)
	}
	for _, workers := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			pool := loader.NewPool(workers)
			defer pool.Close()
			l, err := loader.New(pool, loader.Config{Source: src, Pipeline: pipe, Seed: 1, Shuffle: true,
				BatchSize: 64, World: 1})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			b.ResetTimer()
			cpu0 := clienttest.CPUTime()
			for n := 0; n < b.N; {
				bt, err := l.Next(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				n += bt.Len()
				bt.Release()
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "images/s")
			// Per image, all workers and the consumer: what idle cores would give.
			b.ReportMetric(float64((clienttest.CPUTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/image")
		})
	}
}
