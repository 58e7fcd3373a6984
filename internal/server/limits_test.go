package server

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

func memGauge(t *testing.T, srv *Server, kind string) int64 {
	t.Helper()
	mfs, err := srv.opts.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "loaderd_memory_bytes" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == kind {
				return int64(m.GetGauge().GetValue())
			}
		}
	}
	t.Fatalf("no loaderd_memory_bytes{kind=%q}", kind)
	return 0
}

// TestMemoryBudget: an Open whose batch memory exceeds what the limit
// leaves is refused before anything is mapped, naming what it needs and
// what is free; idle pools give way to a stream that needs their memory,
// and expire on their own.
func TestMemoryBudget(t *testing.T) {
	const limit = 8 << 20
	srv, api, _ := serve(t, Options{MemoryLimit: limit, IdleTTL: 200 * time.Millisecond},
		testDataset("good", testSource{n: 4096}))
	ctx := context.Background()
	// 8192 f32 8×8×3 samples a batch, 32+4 slots: 216 MiB, far over 8 MiB.
	_, err := openRaw(ctx, api, &pb.Open{Dataset: "good", BatchSize: 8192, MaxInFlight: 32, Augment: "out=f32:chw", Transport: pb.Transport_TRANSPORT_SHM})
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "needs 216.0 MiB") || !strings.Contains(err.Error(), "of 8.0 MiB free") {
		t.Fatalf("got %v, want RESOURCE_EXHAUSTED naming 216.0 MiB needed and the free share of 8.0 MiB", err)
	}
	if n := memGauge(t, srv, memStream); n != 0 {
		t.Fatalf("a refused Open left %d bytes of stream memory counted", n)
	}
	// Two streams of ~3 MiB each fit; they end and their pools idle.
	for range 2 {
		st, err := openRaw(ctx, api, &pb.Open{Dataset: "good", BatchSize: 4096, MaxInFlight: 4, Epochs: 1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := drainRaw(st); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool { return memGauge(t, srv, memStream) == 0 && memGauge(t, srv, memIdle) > 0 })
	// A stream of another shape that needs the idle memory gets it.
	st, err := openRaw(ctx, api, &pb.Open{Dataset: "good", BatchSize: 2048, MaxInFlight: 8, Epochs: 1})
	if err != nil {
		t.Fatalf("an Open that fits once idle pools go was refused: %v", err)
	}
	if _, err := drainRaw(st); err != nil {
		t.Fatal(err)
	}
	// Idle pools expire.
	waitFor(t, func() bool { return memGauge(t, srv, memIdle) == 0 && memGauge(t, srv, memStream) == 0 })
	if total := memGauge(t, srv, memScratch); total <= 0 || total > limit {
		t.Fatalf("scratch counted as %d bytes", total)
	}
}

// TestLongStrings: oversized client strings are refused by name, with the
// limit, and never echoed back.
func TestLongStrings(t *testing.T) {
	_, api, _ := serve(t, Options{}, testDataset("good", testSource{n: 64}))
	long := strings.Repeat("x", 20000) // three of them stay under the 64 KiB request limit
	_, err := openRaw(context.Background(), api, &pb.Open{Dataset: long, Augment: long, ClientName: long, BatchSize: 8})
	if status.Code(err) != codes.InvalidArgument || len(err.Error()) > 400 {
		t.Fatalf("got %v (%d bytes), want a short INVALID_ARGUMENT", status.Code(err), len(err.Error()))
	}
	for _, want := range []string{"dataset of 20000 bytes, over the 256-byte limit", "client_name of 20000", "augment of 20000 bytes, over the 4096-byte limit"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v does not say %q", err, want)
		}
	}
}

// TestUnixSocket: a live daemon's socket is never taken over, a stale one
// is replaced, another kind of file is never removed, and stopping
// removes the path only while it is still this daemon's socket.
func TestUnixSocket(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "d.sock")
	first, err := listenUnix(path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v; want 0600", fi.Mode(), err)
	}
	if _, err := listenUnix(path, 0o600); err == nil || !strings.Contains(err.Error(), ErrSocketInUse.Error()) {
		t.Fatalf("a second daemon on a live socket: %v, want ErrSocketInUse", err)
	}
	// The first daemon's socket is replaced by someone else's: stopping the
	// first must leave the new one alone.
	os.Remove(path)
	other, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	first.Close()
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("stopping removed a socket that was no longer its own: %v", err)
	}
	// Stale: nobody listens.
	other.(*net.UnixListener).SetUnlinkOnClose(false)
	other.Close()
	l, err := listenUnix(path, 0o660)
	if err != nil {
		t.Fatalf("a stale socket was not replaced: %v", err)
	}
	l.Close()
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Fatalf("stopping left its own socket behind: %v", err)
	}
	// A regular file is never removed.
	if err := os.WriteFile(path, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := listenUnix(path, 0o660); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("listening over a regular file: %v", err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "precious" {
		t.Fatalf("the regular file was touched: %q, %v", b, err)
	}
}
