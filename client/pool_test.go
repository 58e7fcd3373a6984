package client_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loaderd/loaderd/client"
	"github.com/loaderd/loaderd/client/clienttest"
	"github.com/loaderd/loaderd/sampler"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// digest names one delivered batch: its place, samples, labels and bytes.
func digest(b *client.Batch) string {
	h := sha256.New()
	binary.Write(h, binary.LittleEndian, []int64{int64(b.Seq), b.Epoch, b.Index, b.Offset})
	binary.Write(h, binary.LittleEndian, b.Indices)
	binary.Write(h, binary.LittleEndian, b.Labels)
	h.Write(b.Data)
	return fmt.Sprintf("%d/%d:%x", b.Epoch, b.Index, h.Sum(nil)[:8])
}

// collect reads s to its end, calling at(n) before taking batch n.
func collect(t *testing.T, s *client.Stream, at func(n int)) []string {
	t.Helper()
	defer s.Close()
	var out []string
	for {
		if at != nil {
			at(len(out))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		b, err := s.Next(ctx)
		cancel()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("after %d batches: %v", len(out), err)
		}
		out = append(out, digest(b))
		if err := b.Release(); err != nil {
			t.Fatal(err)
		}
	}
}

func sameDigests(t *testing.T, want, got []string) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%d batches, one daemon delivers %d", len(got), len(want))
	}
	for i := range want {
		if want[i] != got[i] {
			t.Fatalf("batch %d is %s, one daemon's is %s", i, got[i], want[i])
		}
	}
}

// events records a pool stream's events.
type events struct {
	mu  sync.Mutex
	all []client.PoolEvent
}

func (e *events) add(ev client.PoolEvent) { e.mu.Lock(); e.all = append(e.all, ev); e.mu.Unlock() }
func (e *events) count(k client.PoolEventKind) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.all {
		if ev.Kind == k {
			n++
		}
	}
	return n
}

const poolDataset = "train=synthetic:600?seed=3"

func startPool(t *testing.T, n int, dataset string) ([]*clienttest.Daemon, string) {
	var ds []*clienttest.Daemon
	var addrs []string
	for range n {
		d := clienttest.Start(t, "--dataset", dataset, "--workers", "1")
		ds = append(ds, d)
		addrs = append(addrs, d.Addr)
	}
	return ds, strings.Join(addrs, ",")
}

func poolConfig(ev *events) client.StreamConfig {
	return client.StreamConfig{Dataset: "train", BatchSize: 8, Seed: 11, Epochs: 2, Start: sampler.Position{Epoch: 1, Batch: 3},
		IncludeParams: true, Pool: client.PoolConfig{FailoverAfter: 500 * time.Millisecond, OnEvent: ev.add}}
}

// reference is the stream as one daemon delivers it.
func reference(t *testing.T, d *clienttest.Daemon) []string {
	s, err := d.Dial(t).Open(context.Background(), poolConfig(&events{}))
	if err != nil {
		t.Fatal(err)
	}
	return collect(t, s, nil)
}

// TestPoolSameBatches: a stream over three daemons delivers what one
// daemon does, byte for byte, with every daemon making some of it; and
// so it does when a daemon is killed mid-stream (the stream says so), or
// hangs (SIGSTOP: the stream asks what it owes of the others, or drops
// it after FailoverAfter; without either it would wait forever).
func TestPoolSameBatches(t *testing.T) {
	ds, target := startPool(t, 3, poolDataset)
	want := reference(t, ds[0])
	for _, tc := range []struct {
		name  string
		fault func(d *clienttest.Daemon)
		down  int // DaemonDown events at least
	}{
		{"healthy", nil, 0},
		{"hung", func(d *clienttest.Daemon) { d.Signal(syscall.SIGSTOP) }, 0},
		{"killed", func(d *clienttest.Daemon) { d.Kill() }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := client.Dial(target)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			defer ds[2].Signal(syscall.SIGCONT)
			ev := &events{}
			s, err := c.Open(context.Background(), poolConfig(ev))
			if err != nil {
				t.Fatal(err)
			}
			var stall time.Duration
			last := time.Now()
			got := collect(t, s, func(n int) {
				if n == len(want)/3 && tc.fault != nil {
					tc.fault(ds[2])
				}
				stall, last = max(stall, time.Since(last)), time.Now()
			})
			sameDigests(t, want, got)
			if n := ev.count(client.DaemonDown); n < tc.down {
				t.Fatalf("%d DaemonDown events, want %d", n, tc.down)
			}
			for _, m := range s.Pool() {
				if m.Made == 0 {
					t.Fatalf("daemon %s made no batch: %+v", m.Addr, s.Pool())
				}
			}
			t.Logf("%d batches, longest wait between two %v, pool %+v", len(got), stall.Round(time.Millisecond), s.Pool())
		})
	}
}

// TestPoolRefusesOtherData: daemons that serve different bytes under one
// name are refused at Open, naming them.
func TestPoolRefusesOtherData(t *testing.T) {
	a := clienttest.Start(t, "--dataset", poolDataset)
	b := clienttest.Start(t, "--dataset", "train=synthetic:600?seed=4")
	c, err := client.Dial(a.Addr + "," + b.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Open(context.Background(), poolConfig(&events{}))
	if err == nil || !strings.Contains(err.Error(), "do not serve the same dataset") ||
		!strings.Contains(err.Error(), a.Addr) || !strings.Contains(err.Error(), b.Addr) {
		t.Fatalf("Open over daemons with different data: %v; want a refusal naming both", err)
	}
}

// TestPoolDataLoss: a sample no daemon can read fails the pool stream as
// it fails one daemon's: every batch before it delivered, in order, then
// DATA_LOSS naming the file; not a daemon lost, to be asked again forever.
func TestPoolDataLoss(t *testing.T) {
	data := filepath.Join(t.TempDir(), "bad.tar")
	writeTar(t, data, 64, 37)
	ds, target := startPool(t, 2, "train=tar:"+data)
	cfg := client.StreamConfig{Dataset: "train", BatchSize: 8, NoShuffle: true, Epochs: 1,
		Pool: client.PoolConfig{OnEvent: func(client.PoolEvent) {}}}
	var errs [2]error
	var got [2]int
	for i, addr := range []string{ds[0].Addr, target} {
		c, err := client.Dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s, err := c.Open(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			b, err := s.Next(ctx)
			cancel()
			if err != nil {
				errs[i] = err
				break
			}
			if b.Index != int64(got[i]) {
				t.Fatalf("batch %d has index %d", got[i], b.Index)
			}
			got[i]++
			b.Release()
		}
		s.Close()
	}
	for i, what := range []string{"one daemon", "the pool"} {
		if status.Code(errors.Unwrap(errs[i])) != codes.DataLoss && !strings.Contains(fmt.Sprint(errs[i]), "DataLoss") ||
			!strings.Contains(fmt.Sprint(errs[i]), "0037.png") || got[i] != 6 {
			// Classes sort: c0's 32 members, then c1's, of which 0037.png
			// is the 19th: index 50, in batch 6.
			t.Errorf("%s: %d batches, then %v; want 6 and DATA_LOSS naming 0037.png", what, got[i], errs[i])
		}
	}
}

// writeTar writes n 8×8 PNGs as train/cK/NNNN.png, the one at bad cut short.
func writeTar(t *testing.T, path string, n, bad int) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	for i := range n {
		img := image.NewRGBA(image.Rect(0, 0, 8, 8))
		img.Pix[0] = byte(i)
		var buf bytes.Buffer
		png.Encode(&buf, img)
		b := buf.Bytes()
		if i == bad {
			b = b[:len(b)/2]
		}
		tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("train/c%d/%04d.png", i%2, i), Mode: 0o644, Size: int64(len(b))})
		tw.Write(b)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}
