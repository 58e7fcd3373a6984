package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/loaderd/loaderd/internal/convert"
	"github.com/loaderd/loaderd/internal/inspect"
	"github.com/loaderd/loaderd/loader"
)

func convertMain(ctx context.Context, args []string) error {
	var o convert.Options
	var onError string
	fs := flag.NewFlagSet("loaderd convert", flag.ContinueOnError)
	fs.StringVar(&o.From, "from", "", "source dataset, FORMAT:PATH")
	fs.StringVar(&o.To, "to", "", "arrow:FILE.arrow, or arrow:DIR for part-NNNNN.arrow shards")
	fs.Int64Var(&o.Shard, "shard", 0, "samples per shard (directory output; 0: one shard)")
	fs.IntVar(&o.Workers, "workers", 0, "decoding goroutines (default GOMAXPROCS)")
	fs.StringVar(&onError, "on-error", "fail", "unreadable samples: fail, or skip (leave out and list)")
	fs.BoolVar(&o.Overwrite, "overwrite", false, "replace an output that exists and is not empty")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var errs []error
	if o.From == "" {
		errs = append(errs, errors.New("--from is required"))
	}
	if !strings.HasPrefix(o.To, "arrow:") {
		errs = append(errs, fmt.Errorf("--to %q: want arrow:PATH", o.To))
	}
	if o.Shard < 0 || o.Workers < 0 {
		errs = append(errs, errors.New("--shard and --workers must not be negative"))
	}
	p, err := loader.ParseErrorPolicy(onError)
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	o.OnError, o.Progress = p, os.Stderr
	sum, err := convert.Run(ctx, o)
	if err != nil {
		return err
	}
	fmt.Println(sum)
	return nil
}

func indexMain(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("loaderd index", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: loaderd index SHARD.tar|DIR|GLOB…\n\nwrites SHARD.tar.idx beside each tar shard: upload it beside the shard, and an s3:// dataset\nopens with one small GET per shard instead of reading its headers")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("index: want one or more tar shards, directories or globs")
	}
	files, err := convert.IndexTars(fs.Args())
	for _, f := range files {
		fmt.Println("wrote", f)
	}
	return err
}

func inspectMain(ctx context.Context, args []string) error {
	var o inspect.Options
	fs := flag.NewFlagSet("loaderd inspect", flag.ContinueOnError)
	fs.StringVar(&o.Sheet, "sheet", "", "write a PNG contact sheet of samples here")
	fs.IntVar(&o.Samples, "samples", 0, "samples on the sheet (default 64)")
	fs.IntVar(&o.Columns, "columns", 0, "sheet columns (default 8)")
	fs.BoolVar(&o.Augmented, "augmented", false, "draw the samples after augmentation")
	fs.StringVar(&o.Ops, "augment", "", "augmentation for --augmented (default crop=SIZE:4,flip; images of size=any need resize=, center_crop= or random_resized_crop= first, e.g. random_resized_crop=224,flip)")
	fs.Uint64Var(&o.Seed, "seed", 0, "augmentation seed")
	fs.Int64Var(&o.Epoch, "epoch", 0, "augmentation epoch")
	fs.BoolVar(&o.Verify, "verify", false, "decode every sample and count the unreadable ones (size=any: and measure every size)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("inspect: want one FORMAT:PATH argument, got %d", fs.NArg())
	}
	o.Source = fs.Arg(0)
	rep, err := inspect.Run(ctx, o)
	if err != nil {
		return err
	}
	fmt.Println(rep)
	return nil
}
