package loader_test

import (
	"context"
	"fmt"
	"io"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/loader"

	// The formats a program takes are those it imports; this one takes
	// synthetic:N. (cmd/loaderd/formats.go imports every format.)
	"github.com/loaderd/loaderd/loader/format/synthetic"
)

// Example streams two epochs of rank 1 of 2 from the synthetic dataset,
// with the classic CIFAR training augmentation, on a pool of 2 workers.
func Example() {
	src, err := loader.Open("synthetic:1000")
	if err != nil {
		panic(err)
	}
	defer src.Close()
	pipe, err := augment.NewPipeline(src.Spec(), augment.CIFARTrain(sample.F32, sample.CHW)...)
	if err != nil {
		panic(err)
	}
	pool := loader.NewPool(2)
	defer pool.Close()
	l, err := loader.New(pool, loader.Config{Source: src, Pipeline: pipe, Rank: 1, World: 2, Seed: 42,
		Shuffle: true, BatchSize: 128, Epochs: 2})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	for {
		b, err := l.Next(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			panic(err)
		}
		fmt.Printf("epoch %d batch %d: %d images of %v, %d bytes\n", b.Epoch, b.Index, b.Len(), b.Spec, len(b.Data))
		b.Release()
	}
	// Output:
	// epoch 0 batch 0: 128 images of chw[3 32 32]/f32, 1572864 bytes
	// epoch 0 batch 1: 128 images of chw[3 32 32]/f32, 1572864 bytes
	// epoch 0 batch 2: 128 images of chw[3 32 32]/f32, 1572864 bytes
	// epoch 0 batch 3: 116 images of chw[3 32 32]/f32, 1425408 bytes
	// epoch 1 batch 0: 128 images of chw[3 32 32]/f32, 1572864 bytes
	// epoch 1 batch 1: 128 images of chw[3 32 32]/f32, 1572864 bytes
	// epoch 1 batch 2: 128 images of chw[3 32 32]/f32, 1572864 bytes
	// epoch 1 batch 3: 116 images of chw[3 32 32]/f32, 1425408 bytes
}

func ExampleSplit() {
	src := synthetic.New(1000, 0) // 10 classes
	val, _ := loader.Split(src, 20, true)
	train, _ := loader.Split(src, 20, false)
	fmt.Println(train.Len(), val.Len(), val)
	// Output: 800 200 synthetic:1000?holdout=20&part=val
}
