package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"time"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/cache"
)

// benchConfig is `loaderd bench`: the data path in-process, no network.
type benchConfig struct {
	Source    string
	Workers   int
	BatchSize int
	Epochs    int64
	Augment   string
	// CPUProfile, when set, is where a pprof CPU profile of the run goes:
	// the data path's cost by function, for `go tool pprof`.
	CPUProfile string
}

func (c *benchConfig) EnsureDefaults() {
	if c.Source == "" {
		c.Source = "synthetic"
	}
	if c.Workers == 0 {
		c.Workers = 2
	}
	if c.BatchSize == 0 {
		c.BatchSize = 256
	}
	if c.Epochs == 0 {
		c.Epochs = 3
	}
}

func (c *benchConfig) Validate() error {
	var errs []error
	if c.Workers < 1 {
		errs = append(errs, fmt.Errorf("--workers %d: want at least 1", c.Workers))
	}
	if err := loader.CheckBatchSize(c.BatchSize); err != nil {
		errs = append(errs, fmt.Errorf("--batch: %w", err))
	}
	if c.Epochs < 1 {
		errs = append(errs, fmt.Errorf("--epochs %d: want at least 1", c.Epochs))
	}
	if c.Augment != "" {
		if _, err := augment.ParseOps(c.Augment); err != nil {
			errs = append(errs, fmt.Errorf("--augment: %w", err))
		}
	}
	return errors.Join(errs...)
}

func benchMain(ctx context.Context, args []string) error {
	var cfg benchConfig
	fs := flag.NewFlagSet("loaderd bench", flag.ContinueOnError)
	fs.StringVar(&cfg.Source, "source", "", "dataset as FORMAT:PATH (default synthetic)")
	fs.IntVar(&cfg.Workers, "workers", 0, "worker goroutines (default 2)")
	fs.IntVar(&cfg.BatchSize, "batch", 0, "batch size (default 256)")
	fs.Int64Var(&cfg.Epochs, "epochs", 0, "epochs to run (default 3)")
	fs.StringVar(&cfg.Augment, "augment", "", "augmentation spec (default: the CIFAR training transform)")
	fs.StringVar(&cfg.CPUProfile, "cpuprofile", "", "write a CPU profile of the run to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.CPUProfile != "" {
		f, err := os.Create(cfg.CPUProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	return runBench(ctx, cfg, os.Stdout)
}

func runBench(ctx context.Context, cfg benchConfig, out io.Writer) error {
	src, err := cache.Open(cfg.Source) // loader.Open, plus ?cache=decoded
	if err != nil {
		return err
	}
	defer src.Close()
	ops := augment.CIFARTrain(sample.F32, sample.CHW)
	if cfg.Augment != "" {
		ops, _ = augment.ParseOps(cfg.Augment)
	}
	pipe, err := augment.NewPipeline(src.Spec(), ops...)
	if err != nil {
		return err
	}
	pool := loader.NewPool(cfg.Workers)
	defer pool.Close()
	l, err := loader.New(pool, loader.Config{Source: src, Pipeline: pipe, World: 1, Seed: 1, Shuffle: true,
		BatchSize: cfg.BatchSize, Epochs: cfg.Epochs})
	if err != nil {
		return err
	}
	defer l.Close()
	fmt.Fprintf(out, "%s: %d samples, %s → %v, batch %d, %d workers\n", src, src.Len(), pipe, pipe.Out(), cfg.BatchSize, cfg.Workers)
	start, images := time.Now(), 0
	for {
		b, err := l.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		images += b.Len()
		if b.Index == l.BatchesPerEpoch()-1 {
			fmt.Fprintf(out, "epoch %d: %d images, %.0f images/s\n", b.Epoch, images, float64(images)/time.Since(start).Seconds())
		}
		b.Release()
	}
	el := time.Since(start)
	fmt.Fprintf(out, "total: %d images in %v: %.0f images/s\n", images, el.Round(time.Millisecond), float64(images)/el.Seconds())
	return nil
}
