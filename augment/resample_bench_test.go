package augment

import (
	"testing"

	"github.com/loaderd/loaderd/client/sample"
)

// BenchmarkResampleRRC is the geometric stage of random_resized_crop=224
// on a 450×400 box of a 500×450 image (a typical ImageNet draw).
func BenchmarkResampleRRC(b *testing.B) {
	p, err := NewPipeline(Spec{C: 3, DType: sample.U8, Layout: sample.HWC}, RandomResizedCrop{Size: 224})
	if err != nil {
		b.Fatal(err)
	}
	const h, w = 450, 500
	src := make([]byte, h*w*3)
	for i := range src {
		src[i] = byte(i * 7)
	}
	dst := make([]byte, p.Out().Bytes())
	var sc Scratch
	prm := sample.Params{Box: sample.Box{X: 20, Y: 30, W: 450, H: 400}}
	for b.Loop() {
		if err := p.ApplySized(dst, src, h, w, prm, &sc); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkResampleRRCImageNet is the whole per-image augment work of
// the ImageNet training input after decode: BenchmarkResampleRRC's crop
// then flip (half the images), normalize and f32 CHW output.
func BenchmarkResampleRRCImageNet(b *testing.B) {
	ops, err := ParseOps("random_resized_crop=224,flip=0.5,normalize=imagenet,out=f32:chw")
	if err != nil {
		b.Fatal(err)
	}
	p, err := NewPipeline(Spec{C: 3, DType: sample.U8, Layout: sample.HWC}, ops...)
	if err != nil {
		b.Fatal(err)
	}
	const h, w = 450, 500
	src := make([]byte, h*w*3)
	for i := range src {
		src[i] = byte(i * 7)
	}
	dst := make([]byte, p.Out().Bytes())
	var sc Scratch
	prm := sample.Params{Box: sample.Box{X: 20, Y: 30, W: 450, H: 400}}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		prm.Flip = i%2 == 1
		if err := p.ApplySized(dst, src, h, w, prm, &sc); err != nil {
			b.Fatal(err)
		}
	}
}
