package server

import (
	"context"
	"image"
	"image/png"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loaderd/loaderd/client"
)

// reserveWait waits for memory others give back, and fails naming what it
// needed once its wait is over.
func TestBudgetReserveWait(t *testing.T) {
	b := newBudget(100)
	if err := b.reserve(memStream, 80); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- b.reserveWait(memDecode, 50, time.Minute) }()
	b.release(memStream, 80)
	if err := <-done; err != nil || b.inUse(memDecode) != 50 {
		t.Fatalf("after the release: %v, %d decode bytes", err, b.inUse(memDecode))
	}
	err := b.reserveWait(memDecode, 60, 20*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "needs 60 B") || !strings.Contains(err.Error(), "after waiting 20ms") {
		t.Fatalf("a wait that runs out: %v", err)
	}
	if err := b.reserveWait(memDecode, 101, time.Minute); err == nil {
		t.Fatal("more than the whole limit waited instead of failing")
	}
}

// A daemon counts the decode of a large image in --memory-limit (issue 29,
// case 5): a 2,000×2,000 PNG of a dataset resized to 32×32 needs 15 MiB
// to decode, more than the daemon's 8 MiB, and its sample fails naming
// the file and the memory, where it used to be decoded outside any limit.
func TestRunDecodeMemoryInBudget(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(filepath.Join(dir, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "a", "big.png"))
	if err != nil {
		t.Fatal(err)
	}
	if err := png.Encode(f, image.NewGray(image.Rect(0, 0, 2000, 2000))); err != nil {
		t.Fatal(err)
	}
	f.Close()
	sock := filepath.Join(t.TempDir(), "loaderd.sock")
	cfg := Config{Unix: sock, Datasets: []string{"d=folder:" + dir + "?size=32&resize=bilinear"}, Workers: 1,
		ShutdownTimeout: time.Second, MemoryLimit: 8 << 20}
	cfg.EnsureDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan []string, 1)
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, slog.New(slog.DiscardHandler), func(a []string) { ready <- a }) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Run: %v", err)
	}
	c, err := client.Dial("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.Open(context.Background(), client.StreamConfig{Dataset: "d", BatchSize: 1, Epochs: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Next(context.Background())
	s.Close()
	if status.Code(err) != codes.DataLoss && status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "big.png") ||
		!strings.Contains(err.Error(), "needs 15 MiB to decode") {
		t.Fatalf("the big image's sample: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
