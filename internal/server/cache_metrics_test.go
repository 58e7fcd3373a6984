package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/loaderd/loaderd/client"
	"github.com/loaderd/loaderd/loader/cache"
	_ "github.com/loaderd/loaderd/loader/format/synthetic"
)

// datasetMetric returns the value of a counter or gauge for one dataset.
func datasetMetric(t *testing.T, srv *Server, name, dataset string) float64 {
	t.Helper()
	mfs, err := srv.opts.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "dataset" && l.GetValue() == dataset {
					if c := m.GetCounter(); c != nil {
						return c.GetValue()
					}
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no metric %s{dataset=%q}", name, dataset)
	return 0
}

// TestDecodedCacheServed: a dataset opened with ?cache=decoded (as
// --dataset gives it) is reserved in the budget, serves two streams of
// different seeds, and exports what the cache counted: every image sent
// was a hit or a miss, each sample was decoded into the cache once.
func TestDecodedCacheServed(t *testing.T) {
	cfg := Config{Datasets: []string{"c=synthetic:500?cache=decoded", "plain=synthetic:10"}}
	ds, err := cfg.OpenDatasets()
	if err != nil {
		t.Fatal(err)
	}
	c, ok := ds[0].Source.(*cache.Cache)
	if !ok {
		t.Fatalf("dataset c is a %T, want a *cache.Cache", ds[0].Source)
	}
	srv, err := New(Options{Workers: 2, Logger: slog.New(slog.DiscardHandler), AckTimeout: 5 * time.Second}, ds...)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	if got := srv.mem.inUse(memCache); got != c.Reserved() || got < 500*3072 {
		t.Fatalf("budget holds %d bytes of cache, want the cache's %d", got, c.Reserved())
	}
	cl := dial(t, lis.Addr().String())
	for seed := range uint64(2) {
		readAll(t, cl, client.StreamConfig{Dataset: "c", BatchSize: 50, Seed: seed, Epochs: 2})
	}
	hits := datasetMetric(t, srv, "loaderd_cache_hits_total", "c")
	misses := datasetMetric(t, srv, "loaderd_cache_misses_total", "c")
	// A sample at an epoch's end and the next epoch's start may be read
	// by both workers at once: a few misses more than samples.
	if hits+misses != 2000 || misses < 500 || misses > 550 {
		t.Errorf("%v hits and %v misses for 2,000 images sent, one stream at a time; want about 500 misses", hits, misses)
	}
	for name, want := range map[string]float64{
		"loaderd_cache_entries":         500,
		"loaderd_cache_bytes":           500 * 3072,
		"loaderd_cache_capacity_bytes":  500 * 3072,
		"loaderd_cache_reserved_bytes":  float64(c.Reserved()),
		"loaderd_cache_evictions_total": 0,
	} {
		if got := datasetMetric(t, srv, name, "c"); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	mfs, _ := srv.opts.Registry.Gather()
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "loaderd_cache_") && len(mf.GetMetric()) != 1 {
			t.Errorf("%s has %d series; only dataset c has a cache", mf.GetName(), len(mf.GetMetric()))
		}
	}
}

// TestDecodedCacheOverBudget: a cache the memory limit cannot hold stops
// the daemon at start, naming the dataset and the option to change.
func TestDecodedCacheOverBudget(t *testing.T) {
	cfg := Config{Datasets: []string{"big=synthetic:5000?cache=decoded&cache_bytes=12MiB"}}
	ds, err := cfg.OpenDatasets()
	if err != nil {
		t.Fatal(err)
	}
	defer ds[0].Source.Close()
	_, err = New(Options{Workers: 2, Logger: slog.New(slog.DiscardHandler), MemoryLimit: 8 << 20}, ds...)
	if !errors.Is(err, ErrOverBudget) || !strings.Contains(err.Error(), "dataset big") || !strings.Contains(err.Error(), "cache_bytes") {
		t.Fatalf("New: %v, want ErrOverBudget naming dataset big and cache_bytes", err)
	}
	if _, err := (&Config{Datasets: []string{"x=synthetic:5?cache=yes"}}).OpenDatasets(); err == nil || !strings.Contains(err.Error(), "dataset x") {
		t.Fatalf("a bad cache option: %v", err)
	}
}
