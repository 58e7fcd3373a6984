package server

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loaderd/loaderd/client"
)

func TestConfigValidate(t *testing.T) {
	c := Config{Datasets: []string{"a=synthetic", "a=cifar:/x", "nospec"}, Workers: -1, MaxStreams: -2}
	err := c.Validate()
	if err == nil {
		t.Fatal("bad config accepted")
	}
	for _, want := range []string{`name "a" used twice`, `"nospec": want name=FORMAT:PATH`, "--workers -1", "--max-streams -2"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not report %q", err, want)
		}
	}
	var d Config
	d.EnsureDefaults()
	if err := d.Validate(); err != nil || d.Listen != "127.0.0.1:50051" || d.Datasets[0] != DefaultDataset {
		t.Fatalf("defaults: %+v, %v", d, err)
	}
	bad := Config{Datasets: []string{"x=nosuchformat:/y"}}
	bad.EnsureDefaults()
	if _, err := bad.OpenDatasets(); err == nil || !strings.Contains(err.Error(), "dataset x") {
		t.Fatalf("unknown format: %v", err)
	}
}

// TestRun serves on a Unix socket, streams an epoch, and stops cleanly
// when its context ends, removing the socket.
func TestRun(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "loaderd.sock")
	cfg := Config{Unix: sock, Datasets: []string{"s=synthetic:500"}, Workers: 2, ShutdownTimeout: time.Second}
	cfg.EnsureDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan []string, 1)
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, slog.New(slog.DiscardHandler), func(a []string) { ready <- a }) }()
	<-ready
	c, err := client.Dial("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.Open(context.Background(), client.StreamConfig{Dataset: "s", BatchSize: 100, Epochs: 1})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		b, err := s.Next(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n += len(b.Indices)
		b.Release()
	}
	s.Close()
	if n != 500 {
		t.Fatalf("%d images, want 500", n)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v after its context ended", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not stop")
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket left behind: %v", err)
	}
}
