package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"

	"github.com/loaderd/loaderd/internal/server"

	"github.com/loaderd/loaderd/internal/bytesize"
)

func serveMain(ctx context.Context, args []string) error {
	var cfg server.Config
	var datasets listFlag
	fs := flag.NewFlagSet("loaderd serve", flag.ContinueOnError)
	fs.StringVar(&cfg.Listen, "listen", "", "TCP address to serve on (default 127.0.0.1:50051 unless only --unix is given)")
	fs.StringVar(&cfg.Unix, "unix", "", "Unix socket path for clients on this host (shared memory is handed over on PATH.fd beside it)")
	unixMode := fs.String("unix-mode", "0660", "permissions of the Unix sockets (octal)")
	memLimit := fs.String("memory-limit", "", "bound on batch memory: streams' pinned pools, idle pools, worker scratch, e.g. 2GiB (default: half the machine's or cgroup's memory)")
	fs.StringVar(&cfg.MetricsListen, "metrics-listen", "", "address for Prometheus /metrics (off when empty)")
	fs.Var(&datasets, "dataset", "dataset to serve as name=FORMAT:PATH, repeatable (default "+server.DefaultDataset+")")
	workers := fs.String("workers", "", "worker goroutines shared by all streams (default GOMAXPROCS), or auto: as many as keep clients from waiting, 1..--workers-max")
	fs.IntVar(&cfg.MaxWorkers, "workers-max", 0, "with --workers auto, the most workers (default GOMAXPROCS)")
	fs.IntVar(&cfg.MaxStreams, "max-streams", 0, "streams served at once (0: unlimited)")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", 0, "graceful stop deadline before a forced stop (default 10s)")
	fs.StringVar(&cfg.OnError, "on-error", "", "unreadable samples: fail the stream (default), or skip them (counted and logged)")
	fs.Int64Var(&cfg.MaxSkips, "max-skips", 0, "with --on-error skip, fail a stream after this many skips (0: no bound)")
	fs.StringVar(&cfg.CacheDir, "cache-dir", "", "local cache of s3:// shards, whole files, one daemon per directory (default $LOADERD_CACHE_DIR, else ~/.cache/loaderd/shards)")
	cacheBytes := fs.String("cache-bytes", "", "bound on --cache-dir, e.g. 200GiB (default: half its file system's free space)")
	fs.StringVar(&cfg.TLSCert, "tls-cert", "", "serve --listen over TLS 1.3 with this certificate chain (PEM); re-read when the file changes")
	fs.StringVar(&cfg.TLSKey, "tls-key", "", "the private key (PEM) of --tls-cert; re-read when the file changes")
	fs.StringVar(&cfg.TLSClientCA, "tls-client-ca", "", "mutual TLS: require client certificates signed by a CA of this PEM bundle; re-read when it changes")
	fs.StringVar(&cfg.AuthTokens, "auth-tokens", "", "require a bearer token on --listen (metadata authorization: Bearer TOKEN); the file has one token a line,\n"+
		"\"TOKEN datasets=NAME,NAME|* [streams=N]\" (tokens of 16 characters or more; # comments), re-read when it changes")
	fs.BoolVar(&cfg.InsecureTCP, "insecure-tcp", false, "allow plaintext on a --listen address that is not loopback (only behind something that encrypts)")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("serve: unexpected arguments %q", fs.Args())
	}
	cfg.Datasets = datasets
	if *workers != "" {
		var err error
		if cfg.Workers, cfg.AutoWorkers, err = server.ParseWorkers(*workers); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
	}
	mode, err := strconv.ParseUint(*unixMode, 8, 32)
	if err != nil {
		return fmt.Errorf("serve: --unix-mode %q: want octal permissions such as 0660", *unixMode)
	}
	cfg.UnixMode = os.FileMode(mode)
	if *cacheBytes != "" {
		if cfg.CacheBytes, err = bytesize.Parse(*cacheBytes); err != nil {
			return fmt.Errorf("serve: --cache-bytes: %w", err)
		}
	}
	if *memLimit != "" {
		if cfg.MemoryLimit, err = bytesize.Parse(*memLimit); err != nil {
			return fmt.Errorf("serve: --memory-limit: %w", err)
		}
	}
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
