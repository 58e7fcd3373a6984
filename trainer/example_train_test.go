package trainer_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	"github.com/loaderd/loaderd/client"
	"github.com/loaderd/loaderd/internal/server"
	"github.com/loaderd/loaderd/loader/format/synthetic"
	"github.com/loaderd/loaderd/trainer"
)

func ExampleTrain() {
	// A daemon serving 256 synthetic images (in production: loaderd serve).
	srv, _ := server.New(server.Options{Logger: slog.New(slog.DiscardHandler)},
		&server.Dataset{Name: "train", Spec: "synthetic", Source: synthetic.New(256, 0)})
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	go srv.Serve(lis)
	defer srv.Shutdown(context.Background())

	c, err := client.Dial(lis.Addr().String())
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
