// Package servertest implements starting a loaderd daemon inside a test:
// the real server over real gRPC on a loopback port, stopped when the test
// ends. It is for tests only; its functions are safe for concurrent use.
package servertest

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/loaderd/loaderd/internal/server"
)

// Start serves datasets on 127.0.0.1 and returns the server and its
// address. Unset options default to 2 workers, a discarded log and a 10 s
// ack timeout.
func Start(tb testing.TB, opts server.Options, datasets ...*server.Dataset) (*server.Server, string) {
	tb.Helper()
	if opts.Workers == 0 {
		opts.Workers = 2
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.AckTimeout == 0 {
		opts.AckTimeout = 10 * time.Second
	}
	srv, err := server.New(opts, datasets...)
	if err != nil {
		tb.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	go srv.Serve(lis)
	tb.Cleanup(func() { srv.Shutdown(context.Background()) })
	return srv, lis.Addr().String()
}
