package integration_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/loaderd/loaderd/client"
	"github.com/loaderd/loaderd/internal/server"
	"github.com/loaderd/loaderd/internal/servertest"
	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/format/synthetic"
)

// gatedSource holds every read until gate closes.
type gatedSource struct {
	loader.Source
	gate chan struct{}
}

func (g gatedSource) Sample(i int64, scratch []byte) (int32, []byte, error) {
	<-g.gate
	return g.Source.Sample(i, scratch)
}

// metric finds the series of name whose labels include want.
func metric(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) *dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := want[lp.GetName()]; ok && v != lp.GetValue() {
					continue next
				}
			}
			return m
		}
	}
	return nil
}

// TestClientWaitReported: Next's blocking time goes to the daemon on each
// batch's ack, and the daemon's histogram and the stream's counter add up
// to exactly what the client measured. The first batch is held back
// 100 ms by the source, so the waits are not all zero.
func TestClientWaitReported(t *testing.T) {
	for _, shm := range []bool{false, true} {
		t.Run(map[bool]string{false: "inline", true: "shm"}[shm], func(t *testing.T) {
			reg := prometheus.NewRegistry()
			src := gatedSource{Source: synthetic.New(256, 0), gate: make(chan struct{})}
			_, addr := servertest.Start(t, server.Options{Registry: reg, Workers: 1},
				&server.Dataset{Name: "gated", Spec: "synthetic", Source: src})
			c, err := client.Dial(addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			s, err := c.Open(ctx, client.StreamConfig{Dataset: "gated", BatchSize: 16, Seed: 1, SharedMemory: shm, Prefetch: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			const hold, batches = 100 * time.Millisecond, 6
			time.AfterFunc(hold, func() { close(src.gate) })
			for range batches {
				b, err := s.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := b.Release(); err != nil {
					t.Fatal(err)
				}
			}
			measured := s.Stats().Wait
			if measured < hold*9/10 {
				t.Fatalf("the client measured %v of waiting, want about %v", measured, hold)
			}
			// Acks travel asynchronously: wait for the last one.
			var h *dto.Histogram
			deadline := time.Now().Add(10 * time.Second)
			for {
				if m := metric(t, reg, "loaderd_client_wait_seconds", map[string]string{"dataset": "gated"}); m != nil {
					h = m.GetHistogram()
				}
				if h.GetSampleCount() == batches || time.Now().After(deadline) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if h.GetSampleCount() != batches {
				t.Fatalf("the daemon's histogram saw %d waits, want one per acked batch (%d)", h.GetSampleCount(), batches)
			}
			if d := math.Abs(h.GetSampleSum() - measured.Seconds()); d > 1e-6 {
				t.Errorf("the daemon's histogram sums %.6f s, the client measured %.6f s", h.GetSampleSum(), measured.Seconds())
			}
			// The longest wait lands in a bucket at or above 100 ms.
			var below float64
			for _, b := range h.GetBucket() {
				if b.GetUpperBound() < hold.Seconds()*9/10 {
					below = float64(b.GetCumulativeCount())
				}
			}
			if below > batches-1 {
				t.Errorf("every wait is under 90 ms in the histogram: %v", h)
			}
			ctr := metric(t, reg, "loaderd_stream_client_wait_seconds_total", map[string]string{"stream": "0"})
			if got := ctr.GetCounter().GetValue(); math.Abs(got-measured.Seconds()) > 1e-6 {
				t.Errorf("stream 0's wait counter is %.6f s, the client measured %.6f s", got, measured.Seconds())
			}
		})
	}
}
