package benchmarks

import (
	"context"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/loaderd/loaderd/client"
	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/internal/server"
	"github.com/loaderd/loaderd/loader"
)

// benchE2E measures batches crossing the process boundary: daemon and
// client in one process here, talking gRPC over a real socket, sharing the
// same 2 cores a co-located trainer would.
func benchE2E(b *testing.B, network string, shm bool, out sample.DType, window int) {
	step, s := openE2E(b, network, shm, out, window)
	for range 8 {
		step()
	}
	b.SetBytes(int64(batchSize * int(s.Header().GetSampleBytes())))
	b.ReportAllocs()
	wait0 := s.Stats().Wait
	start := time.Now()
	b.ResetTimer()
	for b.Loop() {
		step()
	}
	el := time.Since(start)
	b.ReportMetric(float64(b.N*batchSize)/el.Seconds(), "images/s")
	b.ReportMetric(float64(b.N*batchSize)*float64(s.Header().GetSampleBytes())/el.Seconds()/1e9, "GB/s")
	b.ReportMetric(float64(s.Stats().Wait-wait0)/float64(el)*100, "%wait")
}

// openE2E starts a daemon serving CIFAR with 2 workers on a socket of
// network and opens one stream to it, all closed when b ends; step takes
// and releases one batch.
func openE2E(b *testing.B, network string, shm bool, out sample.DType, window int) (step func(), s *client.Stream) {
	src, err := loader.Open("cifar:" + cifarData(b))
	if err != nil {
		b.Fatal(err)
	}
	ds := &server.Dataset{Name: "cifar", Spec: "cifar", Source: src}
	srv, err := server.New(server.Options{Workers: 2, Logger: slog.New(slog.DiscardHandler)}, ds)
	if err != nil {
		b.Fatal(err)
	}
	// The dataset's fingerprint (all of CIFAR's bytes through SHA-256)
	// takes a core for a fraction of a second after start: not the steady
	// state measured here.
	if _, err := ds.Fingerprint(context.Background()); err != nil {
		b.Fatal(err)
	}
	addr := "127.0.0.1:0"
	if network == "unix" {
		addr = filepath.Join(b.TempDir(), "loaderd.sock")
	}
	lis, err := net.Listen(network, addr)
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(lis)
	b.Cleanup(func() { srv.Shutdown(context.Background()) })
	target := lis.Addr().String()
	if network == "unix" {
		target = "unix://" + target
	}
	cl, err := client.Dial(target)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cl.Close() })
	ctx := context.Background()
	s, err = cl.Open(ctx, client.StreamConfig{Dataset: "cifar", BatchSize: batchSize, Seed: 1,
		DType: out, SharedMemory: shm, Prefetch: window})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return func() {
		bt, err := s.Next(ctx)
		if err == io.EOF {
			b.Fatal("stream ended")
		}
		if err != nil {
			b.Fatal(err)
		}
		bt.Release()
	}, s
}

// benchShmShare measures the shared-memory transport as a share of the
// in-process ceiling. On a VM whose speed drifts by a third from one
// minute to the next, two benchmarks run one after the other compare
// nothing; here the two take turns of ratioTurn batches each, so every
// drift lands on both. Each turn first drains, untimed, the batches its
// side made while the other side ran (its window: 12 slots for shm, 4
// in process), so only the steady rate is timed.
func benchShmShare(b *testing.B, out sample.DType) {
	const ratioTurn, drain = 64, 16
	ceiling, _ := openPipeline(b, "cifar", 2, out)
	shm, _ := openE2E(b, "unix", true, out, 0)
	turn := func(step func()) time.Duration {
		for range drain {
			step()
		}
		t := time.Now()
		for range ratioTurn {
			step()
		}
		return time.Since(t)
	}
	turn(ceiling)
	turn(shm)
	b.ReportAllocs()
	var inproc, viaShm time.Duration
	b.ResetTimer()
	for b.Loop() {
		inproc += turn(ceiling)
		viaShm += turn(shm)
	}
	images := float64(b.N * ratioTurn * batchSize)
	b.ReportMetric(images/inproc.Seconds(), "ceiling-images/s")
	b.ReportMetric(images/viaShm.Seconds(), "shm-images/s")
	b.ReportMetric(inproc.Seconds()/viaShm.Seconds()*100, "%ceiling")
}

func BenchmarkE2E(b *testing.B) {
	b.Run("ceiling=inprocess/out=f32/workers=2", func(b *testing.B) { benchPipeline(b, "cifar", 2, sample.F32) })
	b.Run("transport=shm/net=unix/out=f32", func(b *testing.B) { benchE2E(b, "unix", true, sample.F32, 0) })
	// The two above in turns: the figure to quote for shm against the ceiling.
	b.Run("share=shm/ceiling/out=f32", func(b *testing.B) { benchShmShare(b, sample.F32) })
	// The client's default window is 8; 4 shows why.
	b.Run("transport=shm/net=unix/out=f32/window=4", func(b *testing.B) { benchE2E(b, "unix", true, sample.F32, 4) })
	b.Run("transport=shm/net=unix/out=u8", func(b *testing.B) { benchE2E(b, "unix", true, sample.U8, 0) })
	b.Run("transport=inline/net=tcp/out=f32", func(b *testing.B) { benchE2E(b, "tcp", false, sample.F32, 0) })
	b.Run("transport=inline/net=unix/out=f32", func(b *testing.B) { benchE2E(b, "unix", false, sample.F32, 0) })
	b.Run("transport=inline/net=tcp/out=u8", func(b *testing.B) { benchE2E(b, "tcp", false, sample.U8, 0) })
}
