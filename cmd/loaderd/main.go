// Command loaderd is the data-loading daemon that feeds GPU trainers.
//
//	loaderd serve [flags]   serve datasets over gRPC
//	loaderd bench [flags]   run the data path in-process and print its rate
//	loaderd convert [flags] decode a dataset once into raw-pixel Arrow shards
//	loaderd inspect [flags] FORMAT:PATH   count, classes, shape; a PNG contact sheet
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

const usage = `usage: loaderd <command> [flags]

commands:
  serve   serve datasets to trainers over gRPC
  bench   run sampler → source → augmentation → batches in-process and print images/s
  convert decode a dataset once into raw-pixel Arrow IPC shards (--from FORMAT:PATH --to arrow:PATH)
  inspect describe a dataset and draw a PNG contact sheet (inspect [--sheet F.png] FORMAT:PATH)

Formats: cifar:PATH, synthetic[:N], folder:DIR, tar:FILE|DIR|GLOB, arrow:PATH, parquet:PATH;
options follow '?', and every format takes ?holdout=K&part=train|val.

Run 'loaderd <command> -h' for a command's flags.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "serve":
		err = serveMain(ctx, args)
	case "bench":
		err = benchMain(ctx, args)
	case "convert":
		err = convertMain(ctx, args)
	case "inspect":
		err = inspectMain(ctx, args)
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "loaderd: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loaderd:", err)
		os.Exit(1)
	}
}

// listFlag collects a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func newLogger(level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: %w", level, err)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lv})), nil
}
