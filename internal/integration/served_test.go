package integration_test

import (
	"testing"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client"
	"github.com/loaderd/loaderd/internal/server"
	"github.com/loaderd/loaderd/internal/servertest"
	"github.com/loaderd/loaderd/loader"
)

// served opens the dataset spec, folds chain over it, and serves it as
// name from a daemon on a real socket: the source and the pipeline to
// rebuild samples with, and a client of the daemon. All are closed when
// the test ends.
func served(t *testing.T, spec, chain, name string) (loader.Source, *augment.Pipeline, *client.Client) {
	t.Helper()
	src, err := loader.Open(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	ops, err := augment.ParseOps(chain)
	if err != nil {
		t.Fatal(err)
	}
	pipe, err := augment.NewPipeline(src.Spec(), ops...)
	if err != nil {
		t.Fatal(err)
	}
	_, addr := servertest.Start(t, server.Options{}, &server.Dataset{Name: name, Spec: spec, Source: src})
	c, err := client.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return src, pipe, c
}
