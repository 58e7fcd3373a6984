package client_test

import (
	"context"
	"testing"
	"unsafe"

	"github.com/loaderd/loaderd/client"
)

// Region is nil inline; over shared memory it is the read-only mapping
// every batch's Data lies within, the same slice for the life of the stream.
func TestStreamRegion(t *testing.T) {
	c := startDaemon(t, 96)
	ctx := context.Background()
	for _, shm := range []bool{false, true} {
		s, err := c.Open(ctx, client.StreamConfig{Dataset: "train", BatchSize: 32, Seed: 1, SharedMemory: shm, Epochs: 1})
		if err != nil {
			t.Fatal(err)
		}
		region := s.Region()
		if (region != nil) != shm {
			t.Fatalf("shm %v: Region of %d bytes", shm, len(region))
		}
		for range 3 {
			b, err := s.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if shm {
				lo := uintptr(unsafe.Pointer(unsafe.SliceData(region)))
				p := uintptr(unsafe.Pointer(unsafe.SliceData(b.Data)))
				if p < lo || p+uintptr(len(b.Data)) > lo+uintptr(len(region)) {
					t.Fatalf("batch %d at %#x+%d outside the region %#x+%d", b.Seq, p, len(b.Data), lo, len(region))
				}
				if r := s.Region(); unsafe.SliceData(r) != unsafe.SliceData(region) || len(r) != len(region) {
					t.Fatal("Region changed without a reconnect")
				}
			}
			if err := b.Release(); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
