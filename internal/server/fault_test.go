//go:build linux

package server

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loaderd/loaderd/loader"
	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// TestTruncatedFileEndsOnlyItsStream: a CIFAR file truncated to half
// while the daemon serves it ends that stream with DATA_LOSS naming the
// file; a stream on another dataset reads on to its end, and the daemon
// (here, the test process) lives. Without the fault recovery the process
// dies of SIGBUS.
func TestTruncatedFileEndsOnlyItsStream(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "data_batch_1.bin")
	var data bytes.Buffer
	for i := range 400 {
		data.WriteByte(byte(i % 10))
		data.Write(bytes.Repeat([]byte{byte(i)}, 32*32*3))
	}
	if err := os.WriteFile(path, data.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := loader.Open("cifar:" + path)
	if err != nil {
		t.Fatal(err)
	}
	_, api, _ := serve(t, Options{}, &Dataset{Name: "cifar", Spec: "cifar:" + path, Source: src, Augment: "out=u8:chw"},
		testDataset("good", testSource{n: 64}))
	cut, err := openRaw(ctx, api, &pb.Open{Dataset: "cifar", BatchSize: 8, NoShuffle: true, Epochs: 1, MaxInFlight: 1})
	if err != nil {
		t.Fatal(err)
	}
	other, err := openRaw(ctx, api, &pb.Open{Dataset: "good", BatchSize: 8, Epochs: 1, MaxInFlight: 1})
	if err != nil {
		t.Fatal(err)
	}
	r, err := cut.Recv()
	if err != nil {
		t.Fatal(err)
	}
	page := int64(os.Getpagesize())
	if err := os.Truncate(path, int64(data.Len())/2/page*page); err != nil {
		t.Fatal(err)
	}
	if err := ack(cut, r.GetBatch().GetSeq()); err != nil {
		t.Fatal(err)
	}
	n, err := drainRaw(cut)
	if status.Code(err) != codes.DataLoss || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), loader.ErrFault.Error()) {
		t.Fatalf("after %d more batches: %v; want DATA_LOSS naming %s and saying it changed", n, err, path)
	}
	t.Logf("after %d more batches: %v", n, err)
	if n, err := drainRaw(other); err != nil || n != 64/8 {
		t.Fatalf("the other stream: %d batches, %v; want all %d", n, err, 64/8)
	}
}

// stuckSource blocks every read until release closes, as a read from a
// dead network file system would; entered closes on the first.
type stuckSource struct {
	testSource
	entered, release chan struct{}
	once             sync.Once
}

func (s *stuckSource) Sample(i int64, scratch []byte) (int32, []byte, error) {
	s.once.Do(func() { close(s.entered) })
	<-s.release
	return s.testSource.Sample(i, scratch)
}

// TestShutdownWithStuckRead: Shutdown returns by its deadline although a
// worker is stuck in a read and its stream's handler waits for it (the
// daemon then exits, SIGTERM's --shutdown-timeout honoured); before, it
// waited for that read for good.
func TestShutdownWithStuckRead(t *testing.T) {
	src := &stuckSource{testSource: testSource{n: 64}, entered: make(chan struct{}), release: make(chan struct{})}
	srv, api, _ := serve(t, Options{}, &Dataset{Name: "stuck", Spec: "test:", Source: src, Augment: "out=u8:hwc"})
	t.Cleanup(func() { close(src.release) }) // runs before serve's cleanups: the goroutines end
	if _, err := openRaw(context.Background(), api, &pb.Open{Dataset: "stuck", BatchSize: 8}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-src.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("no worker read a sample")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	done := make(chan struct{})
	go func() {
		srv.Shutdown(ctx)
		close(done)
	}()
	select {
	case <-done:
		t.Logf("Shutdown returned after %v", time.Since(start).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown is still waiting for a stuck read 5 s after its 200 ms deadline")
	}
}
