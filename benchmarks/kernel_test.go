package benchmarks

import (
	"math/rand/v2"
	"testing"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
)

// CIFAR-sized images: 32×32×3 u8 in, the classic train transform (crop 32
// pad 4, flip 0.5, totensor + normalize for float outputs) out.
var cifar = augment.Spec{H: 32, W: 32, C: 3, DType: sample.U8}

// images is the number of distinct images cycled through: one batch, so
// the output streams through a batch-sized buffer as it does into a slot
// (3 MiB for f32), and the params vary like a real epoch's.
const images = 256

// benchKernel measures Pipeline.Apply on one goroutine, with params drawn
// ahead of time so only the kernel is timed. Outputs without a layout in
// their name are CHW.
func benchKernel(b *testing.B, in sample.Layout, out sample.DType, outLayout sample.Layout) {
	spec := cifar
	spec.Layout = in
	p, err := augment.NewPipeline(spec, augment.CIFARTrain(out, outLayout)...)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	src := make([]byte, images*spec.Bytes())
	for i := range src {
		src[i] = byte(r.Uint32())
	}
	prm := make([]sample.Params, images)
	for i := range prm {
		prm[i] = p.Draw(7, 0, int64(i))
	}
	n, m := p.Out().Bytes(), spec.Bytes()
	dst := make([]byte, images*n)
	b.SetBytes(int64(n))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		k := i % images
		if err := p.Apply(dst[k*n:(k+1)*n], src[k*m:(k+1)*m], prm[k]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "images/s")
}

// benchCopy is the ceiling: copying the same output bytes per image.
func benchCopy(b *testing.B, out sample.DType) {
	n := cifar.Elems() * out.Size()
	src, dst := make([]byte, images*n), make([]byte, images*n)
	b.SetBytes(int64(n))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		k := i % images
		copy(dst[k*n:(k+1)*n], src[k*n:(k+1)*n])
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "images/s")
}

func BenchmarkKernel(b *testing.B) {
	const hwc, chw = sample.HWC, sample.CHW
	b.Run("in=chw/out=f32", func(b *testing.B) { benchKernel(b, chw, sample.F32, chw) })
	b.Run("in=hwc/out=f32", func(b *testing.B) { benchKernel(b, hwc, sample.F32, chw) })
	b.Run("in=chw/out=f32/layout=hwc", func(b *testing.B) { benchKernel(b, chw, sample.F32, hwc) })
	b.Run("in=hwc/out=f32/layout=hwc", func(b *testing.B) { benchKernel(b, hwc, sample.F32, hwc) })
	b.Run("in=chw/out=f16", func(b *testing.B) { benchKernel(b, chw, sample.F16, chw) })
	b.Run("in=chw/out=bf16", func(b *testing.B) { benchKernel(b, chw, sample.BF16, chw) })
	b.Run("in=hwc/out=bf16", func(b *testing.B) { benchKernel(b, hwc, sample.BF16, chw) })
	b.Run("in=chw/out=u8", func(b *testing.B) { benchKernel(b, chw, sample.U8, chw) })
	b.Run("in=hwc/out=u8/layout=hwc", func(b *testing.B) { benchKernel(b, hwc, sample.U8, hwc) })
	b.Run("copy/out=f32", func(b *testing.B) { benchCopy(b, sample.F32) })
	b.Run("copy/out=f16", func(b *testing.B) { benchCopy(b, sample.F16) })
	b.Run("copy/out=u8", func(b *testing.B) { benchCopy(b, sample.U8) })
}
