package top_test

import (
	"bytes"
	"context"
	"math"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/loaderd/loaderd/client"
	"github.com/loaderd/loaderd/internal/server"
	"github.com/loaderd/loaderd/internal/servertest"
	"github.com/loaderd/loaderd/internal/top"
	"github.com/loaderd/loaderd/loader/format/synthetic"
)

func parse(t *testing.T, text string, at time.Time) top.Sample {
	t.Helper()
	s, err := top.Parse(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	s.At = at
	return s
}

const before = `# TYPE loaderd_images_total counter
loaderd_images_total{dataset="train"} 1000
# TYPE loaderd_stream_info gauge
loaderd_stream_info{stream="0",dataset="train",client="a",rank="0",world="2",transport="shm"} 1
# TYPE loaderd_stream_images_total counter
loaderd_stream_images_total{stream="0"} 1000
loaderd_stream_images_total{stream="1"} 500
# TYPE loaderd_stream_client_wait_seconds_total counter
loaderd_stream_client_wait_seconds_total{stream="0"} 1
# TYPE loaderd_cache_hits_total counter
loaderd_cache_hits_total{dataset="train"} 10
# TYPE loaderd_cache_misses_total counter
loaderd_cache_misses_total{dataset="train"} 10
# TYPE loaderd_workers_busy_seconds_total counter
loaderd_workers_busy_seconds_total 5
# TYPE loaderd_client_wait_seconds histogram
loaderd_client_wait_seconds_bucket{dataset="train",le="+Inf"} 10
loaderd_client_wait_seconds_sum{dataset="train"} 1
loaderd_client_wait_seconds_count{dataset="train"} 10
`

// Two seconds later: stream 0 sent 4000 images and waited 0.5 s; stream 1
// ended and its number was reused by a new stream whose counter restarted
// (so its rate counts from 0); the cache hit 90 of 100 lookups.
const after = `# TYPE loaderd_images_total counter
loaderd_images_total{dataset="train"} 5300
# TYPE loaderd_stream_info gauge
loaderd_stream_info{stream="0",dataset="train",client="a",rank="0",world="2",transport="shm"} 1
loaderd_stream_info{stream="1",dataset="train",client="b",rank="1",world="2",transport="inline"} 1
# TYPE loaderd_stream_images_total counter
loaderd_stream_images_total{stream="0"} 5000
loaderd_stream_images_total{stream="1"} 300
# TYPE loaderd_stream_client_wait_seconds_total counter
loaderd_stream_client_wait_seconds_total{stream="0"} 1.5
# TYPE loaderd_stream_window_batches gauge
loaderd_stream_window_batches{stream="0"} 3
# TYPE loaderd_stream_window_size gauge
loaderd_stream_window_size{stream="0"} 4
# TYPE loaderd_cache_hits_total counter
loaderd_cache_hits_total{dataset="train"} 100
# TYPE loaderd_cache_misses_total counter
loaderd_cache_misses_total{dataset="train"} 20
# TYPE loaderd_workers_busy_seconds_total counter
loaderd_workers_busy_seconds_total 8
# TYPE loaderd_workers gauge
loaderd_workers 4
# TYPE loaderd_workers_active gauge
loaderd_workers_active 2
# TYPE loaderd_workers_auto gauge
loaderd_workers_auto 1
# TYPE loaderd_client_wait_seconds histogram
loaderd_client_wait_seconds_bucket{dataset="train",le="+Inf"} 30
loaderd_client_wait_seconds_sum{dataset="train"} 3
loaderd_client_wait_seconds_count{dataset="train"} 30
`

func TestNewFrame(t *testing.T) {
	t0 := time.Unix(1000, 0)
	f := top.NewFrame(parse(t, before, t0), parse(t, after, t0.Add(2*time.Second)))
	near := func(what string, got, want float64) {
		t.Helper()
		if math.IsNaN(want) != math.IsNaN(got) || !math.IsNaN(want) && math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	near("workers", f.Workers, 4)
	near("active", f.Active, 2)
	near("busy", f.Busy, 1.5)
	if !f.Auto {
		t.Error("auto not seen")
	}
	near("memory (not exported)", f.MemUsed, math.NaN())
	if len(f.Streams) != 2 || f.Streams[0].ID != "0" || f.Streams[1].ID != "1" {
		t.Fatalf("streams %+v", f.Streams)
	}
	s0, s1 := f.Streams[0], f.Streams[1]
	near("stream 0 images/s", s0.ImagesPerSec, 2000)
	near("stream 0 wait share", s0.WaitShare, 0.25)
	near("stream 0 in window", s0.InWindow, 3)
	near("stream 0 window", s0.Window, 4)
	near("stream 1 images/s (counter reset)", s1.ImagesPerSec, 150)
	near("stream 1 wait (none reported)", s1.WaitShare, math.NaN())
	if s1.Client != "b" || s1.Rank != "1/2" || s1.Transport != "inline" {
		t.Errorf("stream 1 labels %+v", s1)
	}
	if len(f.Datasets) != 1 {
		t.Fatalf("datasets %+v", f.Datasets)
	}
	d := f.Datasets[0]
	near("dataset images/s", d.ImagesPerSec, 2150)
	near("hit rate", d.HitRate, 0.9)
	near("mean wait", d.MeanWait, 0.1)
	near("cache bytes (not exported)", d.CacheBytes, math.NaN())

	var out bytes.Buffer
	if err := top.Render(&out, f); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"2 active of 4 (auto)", "25.0%", "90.0%", "3/4", "2150"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("render lacks %q:\n%s", want, out.String())
		}
	}
}

// TestRunAgainstDaemon reads a live daemon's endpoint while a client
// streams, and finds the stream, its client name and a positive rate.
func TestRunAgainstDaemon(t *testing.T) {
	srv, addr := servertest.Start(t, server.Options{},
		&server.Dataset{Name: "train", Spec: "synthetic", Source: synthetic.New(4096, 0)})
	web := httptest.NewServer(srv.MetricsHandler())
	defer web.Close()
	c, err := client.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := c.Open(ctx, client.StreamConfig{Dataset: "train", BatchSize: 64, Seed: 1, Name: "top-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	done := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			b, err := s.Next(ctx)
			if err != nil {
				done <- err
				return
			}
			b.Release()
		}
		done <- nil
	}()
	var out bytes.Buffer
	if err := top.Run(ctx, &out, top.Options{URL: web.URL + "/metrics", Interval: 300 * time.Millisecond, Once: true}); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-done
	text := out.String()
	if strings.Contains(text, "\x1b[") {
		t.Error("--once output has terminal codes")
	}
	var row string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, "top-test") {
			row = l
		}
	}
	if row == "" {
		t.Fatalf("no row for the stream:\n%s", text)
	}
	if f := strings.Fields(row); len(f) < 6 || f[5] == "0" || f[5] == "-" {
		t.Errorf("stream row %q: want a positive images/s in column 6\n%s", row, text)
	}
}
