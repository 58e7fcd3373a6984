package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/loaderd/loaderd/client"
	"github.com/loaderd/loaderd/client/sample"
)

// consumeConfig is `trainer consume` as flags give it.
type consumeConfig struct {
	Addr      string
	Dial      dialFlags
	Dataset   string
	Rank      int
	World     int
	Batch     int
	Epochs    int64
	Seed      uint64
	Transport string
	DType     string
	Prefetch  int
	StepTime  time.Duration
	JSON      bool
}

func (c *consumeConfig) EnsureDefaults() {
	if c.Addr == "" {
		c.Addr = "127.0.0.1:50051"
	}
	if c.Dataset == "" {
		c.Dataset = "synthetic"
	}
	if c.World == 0 {
		c.World = 1
	}
	if c.Batch == 0 {
		c.Batch = 256
	}
	if c.Transport == "" {
		c.Transport = "inline"
	}
}

func (c *consumeConfig) Validate() error {
	var errs []error
	if c.Rank < 0 || c.World < 1 || c.Rank >= c.World {
		errs = append(errs, fmt.Errorf("--rank %d --world %d: want 0 <= rank < world", c.Rank, c.World))
	}
	if c.Batch < 1 {
		errs = append(errs, fmt.Errorf("--batch %d: want at least 1", c.Batch))
	}
	if c.Epochs < 0 {
		errs = append(errs, fmt.Errorf("--epochs %d: want 0 (endless) or more", c.Epochs))
	}
	if c.Transport != "inline" && c.Transport != "shm" {
		errs = append(errs, fmt.Errorf("--transport %q: want inline or shm", c.Transport))
	}
	if c.DType != "" {
		if _, err := sample.ParseDType(c.DType); err != nil {
			errs = append(errs, fmt.Errorf("--dtype: %w", err))
		}
	}
	if c.StepTime < 0 {
		errs = append(errs, fmt.Errorf("--step-time %v is negative", c.StepTime))
	}
	return errors.Join(errs...)
}

func consumeMain(ctx context.Context, args []string) error {
	var c consumeConfig
	fs := flag.NewFlagSet("trainer consume", flag.ContinueOnError)
	fs.StringVar(&c.Addr, "addr", "", "daemon address: host:port, unix:///path, or a pool of daemons serving the same data: host1:port,host2:port or dns:///name:port (default 127.0.0.1:50051)")
	c.Dial.register(fs)
	fs.StringVar(&c.Dataset, "dataset", "", "dataset name (default synthetic)")
	fs.IntVar(&c.Rank, "rank", 0, "this trainer's rank")
	fs.IntVar(&c.World, "world", 0, "number of ranks (default 1)")
	fs.IntVar(&c.Batch, "batch", 0, "batch size (default 256)")
	fs.Int64Var(&c.Epochs, "epochs", 1, "epochs to read (0: endless)")
	fs.Uint64Var(&c.Seed, "seed", 0, "shuffle and augmentation seed")
	fs.StringVar(&c.Transport, "transport", "", "inline or shm (shared memory, same host)")
	fs.StringVar(&c.DType, "dtype", "", "output dtype: f32, f16, bf16, u8 (default the augment spec's)")
	fs.IntVar(&c.Prefetch, "prefetch", 0, "batches received ahead (default 8)")
	fs.DurationVar(&c.StepTime, "step-time", 0, "simulated compute per batch")
	fs.BoolVar(&c.JSON, "json", false, "print a machine-readable summary")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c.EnsureDefaults()
	if err := c.Validate(); err != nil {
		return err
	}
	return runConsume(ctx, c)
}

func runConsume(ctx context.Context, c consumeConfig) error {
	cl, err := c.Dial.dial(c.Addr)
	if err != nil {
		return err
	}
	defer cl.Close()
	dt, _ := sample.ParseDType(c.DType)
	if c.DType == "" {
		dt = 0
	}
	sc := client.StreamConfig{Dataset: c.Dataset, Rank: c.Rank, World: c.World, BatchSize: c.Batch,
		Seed: c.Seed, Epochs: c.Epochs, DType: dt, SharedMemory: c.Transport == "shm", Prefetch: c.Prefetch,
		Name: fmt.Sprintf("trainer-%d", os.Getpid())}
	st, err := client.Consume(ctx, cl, client.ConsumeConfig{Stream: sc, StepTime: c.StepTime, Progress: os.Stderr})
	if err != nil {
		return err
	}
	if c.JSON {
		return json.NewEncoder(os.Stdout).Encode(map[string]any{
			"images": st.Images, "batches": st.Batches, "bytes": st.Bytes, "seconds": st.Elapsed.Seconds(),
			"images_per_s": st.ImagesPerSecond(), "wait_share": st.WaitShare(), "reconnects": st.Reconnects})
	}
	fmt.Printf("%d images in %d batches, %v: %.0f images/s, %.2f GB/s, waiting for data %.1f%% of the time\n",
		st.Images, st.Batches, st.Elapsed.Round(time.Millisecond), st.ImagesPerSecond(),
		float64(st.Bytes)/st.Elapsed.Seconds()/1e9, st.WaitShare()*100)
	return nil
}

func datasetsMain(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("trainer datasets", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:50051", "daemon address (or a pool: see trainer train -h)")
	var d dialFlags
	d.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	cl, err := d.dial(*addr)
	if err != nil {
		return err
	}
	defer cl.Close()
	ds, err := cl.Datasets(ctx)
	if err != nil {
		return err
	}
	for _, d := range ds {
		fmt.Printf("%-12s %-10s %8d samples  %dx%dx%d  %d classes  augment %s\n", d.GetName(), d.GetFormat(), d.GetSize(),
			d.GetShape().GetHeight(), d.GetShape().GetWidth(), d.GetShape().GetChannels(), len(d.GetClasses()), d.GetDefaultAugment())
	}
	return nil
}
