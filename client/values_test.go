package client_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/loaderd/loaderd/client"
	"github.com/loaderd/loaderd/client/clienttest"
	"github.com/loaderd/loaderd/client/sample"
	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// readBatches reads a stream to its end: each batch's Data, or its
// Values with values on the client, checked against the other ways of
// calling Values (misaligned dst, a dst to grow, no allocation).
func readBatches(t *testing.T, c *client.Client, cfg client.StreamConfig) (*pb.StreamHeader, [][]byte) {
	t.Helper()
	s, err := c.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.ValuesOnClient() != cfg.ValuesOnClient {
		t.Fatalf("ValuesOnClient() %v, asked %v", s.ValuesOnClient(), cfg.ValuesOnClient)
	}
	var out [][]byte
	var dst []byte
	for {
		b, err := s.Next(context.Background())
		if err == io.EOF {
			return s.Header(), out
		}
		if err != nil {
			t.Fatal(err)
		}
		if dst, err = b.Values(dst); err != nil {
			t.Fatal(err)
		}
		if !cfg.ValuesOnClient && (!bytes.Equal(dst, b.Data) || b.ValueDType() != b.DType) {
			t.Fatalf("without values on the client, Values is not Data (%v %v)", b.ValueDType(), b.DType)
		}
		odd := make([]byte, len(dst)+1)
		if got, err := b.Values(odd[1:1]); err != nil || !bytes.Equal(got, dst) || &got[0] != &odd[1] {
			t.Fatalf("into a misaligned dst: %v, or other bytes", err)
		}
		out = append(out, append([]byte(nil), dst...))
		if err := b.Release(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestValues: with values on the client the daemon sends a quarter of the
// bytes (or half, or the same), and Values gives what a stream without the
// flag delivers, byte for byte, in every dtype and layout, over both
// transports and over a pool of daemons.
func TestValues(t *testing.T) {
	d := clienttest.Start(t, "--dataset", "train=synthetic:100", "--workers", "2")
	d2 := clienttest.Start(t, "--dataset", "train=synthetic:100", "--workers", "1")
	one := d.Dial(t)
	pool, err := client.Dial(d.Addr + "," + d2.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	const cifar = "crop=32:4:7/77/177,flip=0.5,normalize=cifar10"
	for _, tc := range []struct {
		augment string
		dtype   sample.DType
		layout  sample.Layout
		shm     bool
		pool    bool
	}{
		{cifar, sample.F32, sample.CHW, false, false},
		{cifar, sample.F32, sample.HWC, false, false},
		{cifar, sample.F16, sample.CHW, false, false},
		{cifar, sample.F16, sample.HWC, true, false},
		{cifar, sample.BF16, sample.CHW, true, false},
		{cifar, sample.BF16, sample.HWC, false, false},
		{cifar, sample.U8, sample.HWC, false, false},
		{"resize=40,center_crop=36,flip=0.5,normalize=imagenet", sample.F32, sample.HWC, false, false},
		{cifar, sample.BF16, sample.CHW, false, true},
	} {
		name := fmt.Sprintf("dtype=%v/layout=%v/shm=%v/pool=%v/%s", tc.dtype, tc.layout, tc.shm, tc.pool, strings.SplitN(tc.augment, "=", 2)[0])
		t.Run(name, func(t *testing.T) {
			c := one
			if tc.pool {
				c = pool
			}
			cfg := client.StreamConfig{Dataset: "train", BatchSize: 16, Seed: 9, Epochs: 2, Augment: tc.augment,
				DType: tc.dtype, Layout: tc.layout, SharedMemory: tc.shm}
			h0, want := readBatches(t, c, cfg)
			cfg.ValuesOnClient = true
			h, got := readBatches(t, c, cfg)
			if h.GetDtype() != pb.DType_DTYPE_U8 || h.GetValueDtype() != pb.DType(tc.dtype) ||
				h.GetSampleBytes()*int64(tc.dtype.Size()) != h0.GetSampleBytes() || h.GetAugment() != h0.GetAugment() {
				t.Fatalf("header %v\nwithout the flag %v", h, h0)
			}
			if len(got) != len(want) || len(got) != 14 {
				t.Fatalf("%d batches, %d without the flag", len(got), len(want))
			}
			for i := range got {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("batch %d: Values differs from the daemon's tensor", i)
				}
			}
		})
	}
}

// BenchmarkValues: the client's CPU cost of Values per image received,
// on one batch of a real stream.
func BenchmarkValues(b *testing.B) {
	// Datasets of one batch each: no stream receives while Values runs.
	d := clienttest.Start(b, "--dataset", "train=synthetic:256", "--dataset", "small=synthetic:32", "--workers", "2")
	c := d.Dial(b)
	for _, size := range []int{224, 32} {
		for _, dt := range []sample.DType{sample.F32, sample.F16, sample.BF16} {
			for _, layout := range []sample.Layout{sample.CHW, sample.HWC} {
				name := fmt.Sprintf("dtype=%v/layout=%v/image=%dx%d", dt, layout, size, size)
				b.Run(name, func(b *testing.B) {
					benchValues(b, c, size, dt, layout)
				})
			}
		}
	}
}

func benchValues(b *testing.B, c *client.Client, size int, dt sample.DType, layout sample.Layout) {
	cfg := client.StreamConfig{Dataset: "train", BatchSize: 256, Augment: "crop=32:4,flip=0.5,normalize=cifar10",
		DType: dt, Layout: layout, ValuesOnClient: true, Epochs: 1}
	if size != 32 {
		cfg.Dataset, cfg.BatchSize, cfg.Augment = "small", 32, fmt.Sprintf("resize=%d,flip=0.5,normalize=imagenet", size)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := c.Open(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	batch, err := s.Next(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer batch.Release()
	dst, err := batch.Values(nil)
	if err != nil {
		b.Fatal(err)
	}
	n := len(batch.Indices)
	b.SetBytes(int64(len(dst)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		batch.Values(dst)
	}
	images := float64(b.N) * float64(n)
	b.ReportMetric(images/b.Elapsed().Seconds(), "images/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/images, "ns/image")
}
