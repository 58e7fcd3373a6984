package trainer_test

import (
	"context"
	"fmt"

	"github.com/loaderd/loaderd/client"
	"github.com/loaderd/loaderd/client/clienttest"
	"github.com/loaderd/loaderd/trainer"
)

func ExampleTrain() {
	// A daemon serving 256 synthetic images (in production: loaderd serve
	// --dataset train=...).
	bin, err := clienttest.Binary()
	if err != nil {
		panic(err)
	}
	d, err := clienttest.New(bin, "--dataset", "train=synthetic:256")
	if err != nil {
		panic(err)
	}
	defer d.Stop()

	c, err := client.Dial(d.Addr)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	cfg := trainer.TrainConfig{Dataset: "train", Model: "mlp", Mode: "ddp", Devices: 2, Batch: 32, Epochs: 1,
		Momentum: 0.9, Nesterov: true}
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	res, err := trainer.Train(context.Background(), c, cfg)
	fmt.Println(res.Steps, res.Done, err)
	// Output: 8 true <nil>
}
