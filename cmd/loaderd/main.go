// Command loaderd is the data-loading daemon that feeds GPU trainers.
//
//	loaderd serve [flags]   serve datasets over gRPC
//	loaderd bench [flags]   run the data path in-process and print its rate
//	loaderd convert [flags] decode a dataset once into raw-pixel Arrow shards
//	loaderd index SHARD.tar…   write sidecar indexes for remote tar shards
//	loaderd inspect [flags] FORMAT:PATH   count, classes, shape; a PNG contact sheet
//	loaderd top [flags]     live view of a running daemon, from its metrics
package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/loaderd/loaderd/internal/cli"
)

const usage = `usage: loaderd <command> [flags]

commands:
  serve   serve datasets to trainers over gRPC
  bench   run sampler → source → augmentation → batches in-process and print images/s
  convert decode a dataset once into raw-pixel Arrow IPC shards (--from FORMAT:PATH --to arrow:PATH)
  index   write SHARD.tar.idx beside tar shards, so s3:// shards open without reading their headers
  inspect describe a dataset and draw a PNG contact sheet (inspect [--sheet F.png] FORMAT:PATH)
  top     live view of a running daemon: streams, datasets, workers (needs serve --metrics-listen)

Formats: cifar:PATH, synthetic[:N], folder:DIR, tar:FILE|DIR|GLOB, arrow:PATH, parquet:PATH;
options follow '?', and every format takes ?holdout=K&part=train|val (K per class, or a fraction 0<K<1)
and ?order=torch (shuffle exactly as PyTorch's DistributedSampler, seed for seed, epoch for epoch),
or ?sampler=balanced|weighted:FILE&samples=K (draw with replacement, every class equally often or
by per-sample weights, as PyTorch's WeightedRandomSampler).

Run 'loaderd <command> -h' for a command's flags.
`

func main() {
	cli.Main("loaderd", usage,
		cli.Command{Name: "serve", Run: serveMain},
		cli.Command{Name: "bench", Run: benchMain},
		cli.Command{Name: "convert", Run: convertMain},
		cli.Command{Name: "index", Run: indexMain},
		cli.Command{Name: "inspect", Run: inspectMain},
		cli.Command{Name: "top", Run: topMain},
	)
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
