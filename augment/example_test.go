package augment_test

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
)

// The classic CIFAR-10 training transform over a CIFAR binary record (CHW
// on disk), to float32 CHW: draw the sample's params, then one fused pass.
func ExampleNewPipeline() {
	ops, err := augment.ParseOps("crop=32:4,flip=0.5,normalize=cifar10,out=f32:chw")
	if err != nil {
		panic(err)
	}
	in := augment.Spec{H: 32, W: 32, C: 3, DType: sample.U8, Layout: sample.CHW}
	p, err := augment.NewPipeline(in, ops...)
	if err != nil {
		panic(err)
	}
	fmt.Println(p.In(), "→", p.Out(), p.Out().Bytes(), "bytes")

	src := make([]byte, in.Bytes())
	for i := range src {
		src[i] = 128 // a grey image
	}
	dst := make([]byte, p.Out().Bytes())
	prm := sample.Params{Top: 0, Left: 8, Flip: false}
	if err := p.Apply(dst, src, prm); err != nil {
		panic(err)
	}
	at := func(c, y, x int) float32 {
		return math.Float32frombits(binary.LittleEndian.Uint32(dst[4*((c*32+y)*32+x):]))
	}
	// The window starts 4 rows above the image and 4 columns into it, so
	// output rows 0-3 and columns 28-31 are padding (pixel value 0).
	fmt.Printf("padding %.4f, image %.4f, padding %.4f\n", at(0, 0, 0), at(0, 10, 10), at(0, 10, 31))
	// Output:
	// chw[3 32 32]/u8 → chw[3 32 32]/f32 12288 bytes
	// padding -1.9895, image 0.0428, padding -1.9895
}

// Draw is a pure function of (seed, epoch, index): any worker computes the
// same params for a sample, and a resumed stream repeats them.
func ExamplePipeline_Draw() {
	in := augment.Spec{H: 32, W: 32, C: 3, DType: sample.U8, Layout: sample.HWC}
	p, err := augment.NewPipeline(in, augment.CIFARTrain(sample.BF16, sample.CHW)...)
	if err != nil {
		panic(err)
	}
	a, b := p.Draw(1234, 0, 17), p.Draw(1234, 0, 17)
	fmt.Println(a == b, a.Top >= 0 && a.Top <= 8 && a.Left >= 0 && a.Left <= 8)
	fmt.Println(p)
	// Output:
	// true true
	// crop=32:4,flip=0.5,normalize=cifar10,out=bf16:chw
}

func ExampleFormatOps() {
	ops := []augment.Op{
		augment.RandomCrop{Size: 28, Padding: 2, Fill: []uint8{125, 123, 114}},
		augment.RandomHorizontalFlip{P: 0.5},
		augment.ToTensor{},
		augment.Normalize{Mean: augment.ImageNetMean, Std: augment.ImageNetStd},
		augment.Output{DType: sample.F16, Layout: sample.HWC},
	}
	fmt.Println(augment.FormatOps(ops))
	// Output:
	// crop=28:2:125/123/114,flip=0.5,normalize=imagenet,out=f16:hwc
}

// A modern ImageNet recipe: a random resized crop, a flip,
// TrivialAugmentWide, normalisation and random erasing on the tensor.
// Params record what was drawn for the sample.
func ExampleTrivialAugmentWide() {
	ops, err := augment.ParseOps("random_resized_crop=224,flip,trivial_augment_wide,normalize=imagenet,random_erasing=0.25")
	if err != nil {
		panic(err)
	}
	p, err := augment.NewPipeline(augment.Spec{C: 3, DType: sample.U8, Layout: sample.HWC}, ops...)
	if err != nil {
		panic(err)
	}
	fmt.Println(p)
	fmt.Println(p.Out())

	h, w := 375, 500
	src := make([]byte, h*w*3)
	dst := make([]byte, p.Out().Bytes())
	var scratch augment.Scratch // one per worker
	prm := p.DrawSized(42, 0, 7, h, w)
	if err := p.ApplySized(dst, src, h, w, prm, &scratch); err != nil {
		panic(err)
	}
	fmt.Println(prm.Photo.NumOps, "operation applied")
	// Output:
	// random_resized_crop=224,flip=0.5,trivial_augment_wide=31,normalize=imagenet,random_erasing=0.25:0.02-0.33:0.3-3.3:0
	// chw[3 224 224]/f32
	// 1 operation applied
}
