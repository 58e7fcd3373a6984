package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/loaderd/loaderd/internal/top"
)

// topConfig is what `loaderd top` was asked for.
type topConfig struct {
	Metrics  string
	Interval time.Duration
	Once     bool
}

func (c *topConfig) EnsureDefaults() {
	if c.Metrics == "" {
		c.Metrics = "127.0.0.1:9090"
	}
	if !strings.Contains(c.Metrics, "://") {
		c.Metrics = "http://" + c.Metrics
	}
	if !strings.HasSuffix(c.Metrics, "/metrics") {
		c.Metrics = strings.TrimSuffix(c.Metrics, "/") + "/metrics"
	}
	if c.Interval == 0 {
		c.Interval = time.Second
	}
}

func (c *topConfig) Validate() error {
	var errs []error
	if c.Interval < 100*time.Millisecond || c.Interval > time.Hour {
		errs = append(errs, fmt.Errorf("top: --interval %v (want 100ms..1h)", c.Interval))
	}
	return errors.Join(errs...)
}

func topMain(ctx context.Context, args []string) error {
	var cfg topConfig
	fs := flag.NewFlagSet("loaderd top", flag.ContinueOnError)
	fs.StringVar(&cfg.Metrics, "metrics", "", "the daemon's metrics endpoint: HOST:PORT (serve's --metrics-listen) or a URL (default 127.0.0.1:9090)")
	fs.DurationVar(&cfg.Interval, "interval", 0, "refresh interval; rates are over it (default 1s)")
	fs.BoolVar(&cfg.Once, "once", false, "print one frame, without terminal codes, and exit (for scripts)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("top: unexpected arguments %q", fs.Args())
	}
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	return top.Run(ctx, os.Stdout, top.Options{URL: cfg.Metrics, Interval: cfg.Interval, Once: cfg.Once})
}
