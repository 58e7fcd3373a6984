package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/loaderd/loaderd/internal/server"
)

func serveMain(ctx context.Context, args []string) error {
	var cfg server.Config
	var datasets listFlag
	fs := flag.NewFlagSet("loaderd serve", flag.ContinueOnError)
	fs.StringVar(&cfg.Listen, "listen", "", "TCP address to serve on (default 127.0.0.1:50051 unless only --unix is given)")
	fs.StringVar(&cfg.Unix, "unix", "", "Unix socket path for clients on this host")
	fs.StringVar(&cfg.MetricsListen, "metrics-listen", "", "address for Prometheus /metrics (off when empty)")
	fs.Var(&datasets, "dataset", "dataset to serve as name=FORMAT:PATH, repeatable (default "+server.DefaultDataset+")")
	fs.IntVar(&cfg.Workers, "workers", 0, "worker goroutines shared by all streams (default GOMAXPROCS)")
	fs.IntVar(&cfg.MaxStreams, "max-streams", 0, "streams served at once (0: unlimited)")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", 0, "graceful stop deadline before a forced stop (default 10s)")
	fs.StringVar(&cfg.OnError, "on-error", "", "unreadable samples: fail the stream (default), or skip them (counted and logged)")
	fs.Int64Var(&cfg.MaxSkips, "max-skips", 0, "with --on-error skip, fail a stream after this many skips (0: no bound)")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("serve: unexpected arguments %q", fs.Args())
	}
	cfg.Datasets = datasets
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	log, err := newLogger(*level)
	if err != nil {
		return err
	}
	return server.Run(ctx, cfg, log, nil)
}
