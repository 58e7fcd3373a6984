package client_test

import (
	"context"
	"fmt"

	"github.com/loaderd/loaderd/client"
)

// Read samples by index: decoded as they are, then as a stream with seed
// 1 augments them in epoch 3.
func ExampleClient_GetSamples() {
	addr, stop := serve()
	defer stop()

	c, err := client.Dial(addr)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()
	raw, err := c.GetSamples(ctx, client.GetRequest{Dataset: "train", Indices: []int64{7, 200}})
	if err != nil {
		panic(err)
	}
	for _, s := range raw {
		fmt.Println(s.Index, s.DType, s.Layout, s.Shape, len(s.Data))
	}
	aug, err := c.GetSamples(ctx, client.GetRequest{Dataset: "train", Indices: []int64{7},
		Augment: "crop=32:4,flip=0.5,normalize=cifar10,out=f32:chw", Seed: 1, Epoch: 3})
	if err != nil {
		panic(err)
	}
	fmt.Println(aug[0].Index, aug[0].DType, aug[0].Layout, aug[0].Shape, len(aug[0].Data))
	// Output:
	// 7 u8 hwc [32 32 3] 3072
	// 200 u8 hwc [32 32 3] 3072
	// 7 f32 chw [3 32 32] 12288
}
