package trainer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/loaderd/loaderd/client"
	"github.com/loaderd/loaderd/client/clienttest"
	"github.com/loaderd/loaderd/trainer/nn"
	"github.com/loaderd/loaderd/trainer/tensor"
)

// fitsUpTo is a device on which batches up to limit fit.
func fitsUpTo(limit int) func(int) error {
	return func(b int) error {
		if b > limit {
			return fmt.Errorf("batch %d: %w", b, tensor.ErrOutOfMemory)
		}
		return nil
	}
}

func TestSearchBatch(t *testing.T) {
	for _, tc := range []struct {
		name            string
		start, step, hi int
		limit           int
		want            int
		trials          []int // batches tried, in order; nil: not checked
	}{
		{"double then bisect", 32, 1, 16384, 100, 100, []int{32, 64, 128, 96, 112, 104, 100, 102, 101}},
		{"multiples of the devices", 32, 4, 16384, 1001, 1000, nil},
		{"start fits exactly", 32, 1, 16384, 32, 32, []int{32, 64, 48, 40, 36, 34, 33}},
		{"capped by hi", 32, 1, 100, 1 << 30, 100, []int{32, 64, 100}},
		{"start rounded to step", 30, 8, 16384, 1 << 30, 16384, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, trials, err := searchBatch(tc.start, tc.step, tc.hi, fitsUpTo(tc.limit))
			if err != nil || got != tc.want {
				t.Fatalf("got %d, %v; want %d", got, err, tc.want)
			}
			var tried []int
			for _, tr := range trials {
				tried = append(tried, tr.Batch)
				if tr.Fits != (tr.Batch <= tc.limit) {
					t.Errorf("trial %+v recorded wrongly", tr)
				}
			}
			if tc.trials != nil && !slices.Equal(tried, tc.trials) {
				t.Errorf("tried %v, want %v", tried, tc.trials)
			}
		})
	}
}

// Whatever the device holds, the search returns the largest fitting
// multiple of step, in O(log) tries.
func TestSearchBatchFindsLargest(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		step := 1 + r.IntN(8)
		limit := 32 + r.IntN(20000)
		got, trials, err := searchBatch(32, step, 16384*step, fitsUpTo(limit))
		want := min(limit, 16384*step) / step * step
		if err != nil || got != want {
			t.Fatalf("step %d limit %d: got %d, %v; want %d", step, limit, got, err, want)
		}
		if len(trials) > 40 {
			t.Errorf("step %d limit %d: %d tries", step, limit, len(trials))
		}
	}
}

func TestSearchBatchErrors(t *testing.T) {
	if _, _, err := searchBatch(32, 1, 1000, fitsUpTo(16)); !errors.Is(err, tensor.ErrOutOfMemory) {
		t.Errorf("start too large: %v, want ErrOutOfMemory", err)
	}
	boom := errors.New("device lost")
	_, trials, err := searchBatch(32, 1, 1000, func(b int) error {
		if b > 64 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || len(trials) != 2 {
		t.Errorf("a non-OOM error must end the search: %v after %v", err, trials)
	}
}

// A CPU device's memory limit refuses what would exceed it and counts
// frees back.
func TestCPUMemoryLimit(t *testing.T) {
	d, err := tensor.NewCPU("cpu:0", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d.SetMemoryLimit(4096)
	a, err := d.Alloc(tensor.F32, 768) // 3072 bytes
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Alloc(tensor.F32, 512); !errors.Is(err, tensor.ErrOutOfMemory) {
		t.Fatalf("over the limit: %v", err)
	}
	if err := d.Free(a); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Alloc(tensor.I32, 1024); err != nil {
		t.Fatalf("after free: %v", err)
	}
}

// --batch auto on CPU devices: the batch found fits the limit and the next
// multiple does not; more memory never gives a smaller batch; and Train
// trains with it.
func TestAutoBatch(t *testing.T) {
	cnn := nn.CNNConfig{Widths: []int{4}, Blocks: []int{1}, Classes: 10}
	cfgFor := func(mem int64) TrainConfig {
		c := TrainConfig{Dataset: "train", Model: "cnn", CNN: cnn, Devices: 2, Goroutines: 1, AutoBatch: true,
			DeviceMemory: mem, Epochs: 1}
		c.EnsureDefaults()
		return c
	}
	prev, mems := 0, []int64{16 << 20, 32 << 20, 64 << 20}
	if raceOn {
		mems = mems[:2]
	}
	for _, mem := range mems {
		c := cfgFor(mem)
		b, trials, err := autoBatch(&c, 1)
		if err != nil {
			t.Fatalf("%d MiB: %v", mem>>20, err)
		}
		if b%2 != 0 || b < prev {
			t.Errorf("%d MiB: batch %d (previous limit gave %d)", mem>>20, b, prev)
		}
		fit, over := false, false
		for _, tr := range trials {
			fit = fit || (tr.Batch == b && tr.Fits)
			over = over || (tr.Batch == b+2 && !tr.Fits)
		}
		if !fit || !over {
			t.Errorf("%d MiB: batch %d not bracketed by the tries %v", mem>>20, b, trials)
		}
		t.Logf("%d MiB per device: batch %d after %d tries", mem>>20, b, len(trials))
		prev = b
	}

	addr := clienttest.Start(t, "--workers", "2",
		"--dataset", "train=synthetic:1024").Addr
	cl, err := client.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	c := cfgFor(16 << 20)
	res, err := Train(context.Background(), cl, c)
	if err != nil {
		t.Fatal(err)
	}
	if res.Batch < 32 || len(res.BatchSearch) == 0 || res.Steps != int64(1024/res.Batch) {
		t.Errorf("trained %d steps with batch %d after %v", res.Steps, res.Batch, res.BatchSearch)
	}
	c = cfgFor(0)
	if err := c.Validate(); err == nil {
		t.Error("batch auto on CPU devices without a memory limit validated")
	}
}
