package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/imagedec"
	"github.com/loaderd/loaderd/pinned"

	"github.com/loaderd/loaderd/internal/bytesize"
)

// Run serves until ctx is done or a listener fails, then shuts down:
// health NOT_SERVING, streams told where to resume, graceful stop with a
// forced fallback after c.ShutdownTimeout. It returns the first error of
// any listener or of the metrics server. ready, if not nil, is called with
// the bound addresses once serving.
func Run(ctx context.Context, c Config, log *slog.Logger, ready func(addrs []string)) error {
	nofile, nofileMax, err := raiseOpenFileLimit() // fdlimits_*.go
	if err != nil {
		log.Warn("raising the open-file limit (RLIMIT_NOFILE) to its hard limit", "err", err)
	}
	sec, err := c.security(log) // before the datasets, which may take long to open
	if err != nil {
		return err
	}
	datasets, err := c.OpenDatasets()
	if err != nil {
		return err
	}
	policy, _ := loader.ParseErrorPolicy(c.OnError)
	opts := Options{Workers: c.PoolWorkers(), AutoWorkers: c.AutoWorkers, MaxStreams: c.MaxStreams, Logger: log,
		OnError: policy, MaxSkips: c.MaxSkips, MemoryLimit: c.MemoryLimit, Security: sec}
	if c.Unix != "" && pinned.SharedSupported {
		opts.FdSocket = fdSocketPath(c.Unix)
	}
	srv, err := New(opts, datasets...)
	if err != nil {
		for _, d := range datasets {
			d.Source.Close()
		}
		return err
	}
	// Decodes of large images count in the budget (process-wide: one
	// daemon a process).
	imagedec.SetMemoryGate(srv.decodeGate())
	defer imagedec.SetMemoryGate(nil)
	lis, fdLis, metricsLis, err := c.listen()
	if err != nil {
		srv.Shutdown(context.Background())
		return err
	}

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
	if fdLis != nil {
		g.Go(func() error { return srv.ServeFds(fdLis) })
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
		if everyInterface(c.MetricsListen) {
			log.Warn("metrics served on every interface: /metrics names datasets, clients and their paths to anyone who can reach this port; "+
				"give a host (127.0.0.1:PORT, or this host's private address) to keep it local", "metrics_listen", c.MetricsListen)
		}
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
		if sp := d.Source.Spec(); sp.H == 0 && sp.W == 0 && !strings.Contains(strings.ToLower(d.Spec), "size=any") {
			// Said once, so that a user who declared no size learns why the
			// default augment is ImageNet's (imagedec.NewSource's probe).
			log.Info("dataset images vary in size: served as with size=any (each image at its own size; "+
				"a stream's augment must start with resize, center_crop or random_resized_crop)", "name", d.Name)
		}
	}
	log.Info("serving", "addrs", addrs, "workers", c.PoolWorkers(), "workers_auto", c.AutoWorkers, "memory_limit", bytesize.Format(c.MemoryLimit),
		"nofile_soft", nofile, "nofile_hard", nofileMax)
	if ready != nil {
		ready(addrs)
	}
	err = g.Wait()
	if err != nil {
		log.Error("serve failed", "err", err)
	}
	return err
}

// fdSocketPath is where the shared-memory hand-over socket of a daemon on
// the Unix socket path lives: beside it, so a container that mounts the
// socket's directory reaches both.
func fdSocketPath(unixPath string) string { return unixPath + ".fd" }

// listen opens every listener the config names, or none.
func (c *Config) listen() (lis []net.Listener, fdLis, metrics net.Listener, err error) {
	defer func() {
		if err != nil {
			for _, l := range append(lis, fdLis) {
				if l != nil {
					l.Close()
				}
			}
		}
	}()
	if c.Listen != "" {
		l, err := net.Listen("tcp", c.Listen)
		if err != nil {
			return lis, nil, nil, fmt.Errorf("listen %s: %w", c.Listen, err)
		}
		lis = append(lis, l)
	}
	if c.Unix != "" {
		l, err := listenUnix(c.Unix, c.UnixMode)
		if err != nil {
			return lis, nil, nil, err
		}
		lis = append(lis, l)
		if pinned.SharedSupported { // outside Linux there is no shared memory to hand over
			if fdLis, err = listenUnix(fdSocketPath(c.Unix), c.UnixMode); err != nil {
				return lis, nil, nil, err
			}
		}
	}
	if c.MetricsListen != "" {
		l, err := net.Listen("tcp", c.MetricsListen)
		if err != nil {
			return lis, fdLis, nil, fmt.Errorf("metrics listen %s: %w", c.MetricsListen, err)
		}
		metrics = l
	}
	return lis, fdLis, metrics, nil
}

// everyInterface reports whether a listen address binds every interface
// (":9090", "0.0.0.0:9090", "[::]:9090").
func everyInterface(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "" || (ip != nil && ip.IsUnspecified())
}
