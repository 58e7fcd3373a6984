package client_test

import (
	"context"
	"fmt"

	"github.com/loaderd/loaderd/client"
)

// A stream whose augment spec ends with mixup and cutmix: Data arrives
// mixed, and SoftLabels gives the targets to train it against
// (torchvision's soft labels, float32 [N, classes]).
func ExampleBatch_SoftLabels() {
	addr, stop := serve()
	defer stop()

	c, err := client.Dial(addr)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()
	s, err := c.Open(ctx, client.StreamConfig{Dataset: "train", BatchSize: 4, Seed: 1, Epochs: 1,
		Augment: "crop=32:4,flip,normalize=cifar10,out=f32:chw,mixup=0.2,cutmix=1"})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	classes := int(s.Header().GetNumClasses())
	soft := make([]float32, 4*classes) // reused for every batch
	for range 5 {
		b, err := s.Next(ctx)
		if err != nil {
			panic(err)
		}
		if err := b.SoftLabels(soft); err != nil {
			panic(err)
		}
		m := b.Mix()
		fmt.Printf("%s λ=%.3f box=%+v labels=%v row0=%.3f\n", m.Kind, m.Lambda, m.Box, b.Labels, soft[:classes])
		if err := b.Release(); err != nil {
			panic(err)
		}
	}
	// Output:
	// mixup λ=0.003 box={X:0 Y:0 W:0 H:0} labels=[6 2 6 7] row0=[0.000 0.000 0.000 0.000 0.000 0.000 0.003 0.997 0.000 0.000]
	// mixup λ=0.087 box={X:0 Y:0 W:0 H:0} labels=[0 0 7 4] row0=[0.087 0.000 0.000 0.000 0.913 0.000 0.000 0.000 0.000 0.000]
	// mixup λ=1.000 box={X:0 Y:0 W:0 H:0} labels=[6 9 2 2] row0=[0.000 0.000 0.000 0.000 0.000 0.000 1.000 0.000 0.000 0.000]
	// cutmix λ=0.394 box={X:0 Y:0 W:23 H:27} labels=[1 7 9 4] row0=[0.000 0.394 0.000 0.000 0.606 0.000 0.000 0.000 0.000 0.000]
	// cutmix λ=0.512 box={X:12 Y:7 W:20 H:25} labels=[6 2 4 6] row0=[0.000 0.000 0.000 0.000 0.000 0.000 1.000 0.000 0.000 0.000]
}
