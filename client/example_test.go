package client_test

import (
	"context"
	"fmt"
	"io"

	"github.com/loaderd/loaderd/client"
	"github.com/loaderd/loaderd/client/clienttest"
)

// serve starts a daemon serving 256 synthetic 32×32 RGB images as
// "train" (in production: loaderd serve --dataset train=...), and returns
// its address and a function that stops it.
func serve() (string, func()) {
	bin, err := clienttest.Binary()
	if err != nil {
		panic(err)
	}
	d, err := clienttest.New(bin, "--dataset", "train=synthetic:256")
	if err != nil {
		panic(err)
	}
	return d.Addr, func() { d.Stop() }
}

// A trainer's loop: take a batch, train on it, release it.
func Example() {
	addr, stop := serve()
	defer stop()

	c, err := client.Dial(addr)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()
	s, err := c.Open(ctx, client.StreamConfig{Dataset: "train", BatchSize: 64, Seed: 1, Epochs: 1})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	for {
		b, err := s.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			panic(err)
		}
		// Train on b.Data (b.Shape, b.DType, b.Layout) and b.Labels here.
		fmt.Println(b.Epoch, b.Index, b.Shape, len(b.Data), len(b.Labels))
		if err := b.Release(); err != nil {
			panic(err)
		}
	}
	fmt.Println("resume at", s.Position())
	// Output:
	// 0 0 [64 3 32 32] 786432 64
	// 0 1 [64 3 32 32] 786432 64
	// 0 2 [64 3 32 32] 786432 64
	// 0 3 [64 3 32 32] 786432 64
	// resume at epoch 1 batch 0
}

func ExampleClient_Datasets() {
	addr, stop := serve()
	defer stop()

	c, err := client.Dial(addr)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ds, err := c.Datasets(context.Background())
	if err != nil {
		panic(err)
	}
	for _, d := range ds {
		fmt.Println(d.GetName(), d.GetSize(), d.GetShape().GetHeight(), d.GetShape().GetWidth(), d.GetShape().GetChannels())
	}
	// Output: train 256 32 32 3
}

// Consume measures how fast a daemon delivers, as `trainer consume` does.
func ExampleConsume() {
	addr, stop := serve()
	defer stop()

	c, err := client.Dial(addr)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	st, err := client.Consume(context.Background(), c, client.ConsumeConfig{
		Stream: client.StreamConfig{Dataset: "train", BatchSize: 32, Epochs: 2}})
	if err != nil {
		panic(err)
	}
	fmt.Println(st.Batches, st.Images, st.Reconnects)
	// Output: 16 512 0
}
