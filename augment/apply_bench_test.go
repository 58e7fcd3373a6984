package augment

import (
	"testing"

	"github.com/loaderd/loaderd/client/sample"
)

// BenchmarkApplyCIFAR is the plain CIFAR chain through the fused kernel,
// the path photometric ops must not slow down.
func BenchmarkApplyCIFAR(b *testing.B) {
	in := Spec{H: 32, W: 32, C: 3, DType: sample.U8, Layout: sample.CHW}
	p, err := NewPipeline(in, CIFARTrain(sample.F32, sample.CHW)...)
	if err != nil {
		b.Fatal(err)
	}
	src := make([]byte, in.Bytes())
	for i := range src {
		src[i] = byte(i * 7)
	}
	dst := make([]byte, p.Out().Bytes())
	b.SetBytes(int64(len(dst)))
	for i := 0; b.Loop(); i++ {
		prm := p.Draw(1, 0, int64(i))
		if err := p.Apply(dst, src, prm); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkApplyPhoto is the CIFAR chain with TrivialAugmentWide, color
// jitter and random erasing: the staged path.
func BenchmarkApplyPhoto(b *testing.B) {
	in := Spec{H: 32, W: 32, C: 3, DType: sample.U8, Layout: sample.CHW}
	p := newChain(b, in, "crop=32:4,flip,trivial_augment_wide,color_jitter=0.4:0.4:0.4,normalize=cifar10,out=f32:chw,random_erasing")
	src := make([]byte, in.Bytes())
	for i := range src {
		src[i] = byte(i * 7)
	}
	dst := make([]byte, p.Out().Bytes())
	b.SetBytes(int64(len(dst)))
	for i := 0; b.Loop(); i++ {
		prm := p.Draw(1, 0, int64(i))
		if err := p.Apply(dst, src, prm); err != nil {
			b.Fatal(err)
		}
	}
}
