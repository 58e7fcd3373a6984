package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/loaderd/loaderd/loader"
)

// Run serves until ctx is done or a listener fails, then shuts down:
// health NOT_SERVING, streams told where to resume, graceful stop with a
// forced fallback after c.ShutdownTimeout. It returns the first error of
// any listener or of the metrics server. ready, if not nil, is called with
// the bound addresses once serving.
func Run(ctx context.Context, c Config, log *slog.Logger, ready func(addrs []string)) error {
	datasets, err := c.OpenDatasets()
	if err != nil {
		return err
	}
	policy, _ := loader.ParseErrorPolicy(c.OnError)
	srv, err := New(Options{Workers: c.Workers, MaxStreams: c.MaxStreams, Logger: log,
		OnError: policy, MaxSkips: c.MaxSkips}, datasets...)
	if err != nil {
		for _, d := range datasets {
			d.Source.Close()
		}
		return err
	}
	lis, metricsLis, err := c.listen()
	if err != nil {
		srv.Shutdown(context.Background())
		return err
	}
	defer func() {
		if c.Unix != "" {
			os.Remove(c.Unix)
		}
	}()

	g, gctx := errgroup.WithContext(ctx)
	var addrs []string
	for _, l := range lis {
		addr := l.Addr().String()
		addrs = append(addrs, addr)
		g.Go(func() error {
			// nil once Shutdown stops the server; anything else is a failure.
			if err := srv.Serve(l); err != nil {
				return fmt.Errorf("serve %s: %w", addr, err)
			}
			return nil
		})
	}
	var metricsSrv *http.Server
	if metricsLis != nil {
		mux := http.NewServeMux()
		mux.Handle("/metrics", srv.MetricsHandler())
		metricsSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		g.Go(func() error {
			if err := metricsSrv.Serve(metricsLis); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("metrics %s: %w", metricsLis.Addr(), err)
			}
			return nil
		})
		log.Info("metrics", "addr", metricsLis.Addr().String())
	}
	g.Go(func() error {
		<-gctx.Done()
		if ctx.Err() != nil {
			log.Info("shutting down", "timeout", c.ShutdownTimeout)
		}
		sctx, cancel := context.WithTimeout(context.Background(), c.ShutdownTimeout)
		defer cancel()
		srv.Shutdown(sctx)
		if metricsSrv != nil {
			return metricsSrv.Shutdown(sctx)
		}
		return nil
	})
	for _, d := range datasets {
		log.Info("dataset", "name", d.Name, "source", d.Source.String(), "samples", d.Source.Len(), "augment", d.Augment)
	}
	log.Info("serving", "addrs", addrs, "workers", c.Workers)
	if ready != nil {
		ready(addrs)
	}
	err = g.Wait()
	if err != nil {
		log.Error("serve failed", "err", err)
	}
	return err
}

// listen opens every listener the config names, or none.
func (c *Config) listen() (lis []net.Listener, metrics net.Listener, err error) {
	defer func() {
		if err != nil {
			for _, l := range lis {
				l.Close()
			}
		}
	}()
	if c.Listen != "" {
		l, err := net.Listen("tcp", c.Listen)
		if err != nil {
			return lis, nil, fmt.Errorf("listen %s: %w", c.Listen, err)
		}
		lis = append(lis, l)
	}
	if c.Unix != "" {
		os.Remove(c.Unix) // a stale socket from a previous run
		l, err := net.Listen("unix", c.Unix)
		if err != nil {
			return lis, nil, fmt.Errorf("listen %s: %w", c.Unix, err)
		}
		lis = append(lis, l)
	}
	if c.MetricsListen != "" {
		l, err := net.Listen("tcp", c.MetricsListen)
		if err != nil {
			return lis, nil, fmt.Errorf("metrics listen %s: %w", c.MetricsListen, err)
		}
		metrics = l
	}
	return lis, metrics, nil
}
