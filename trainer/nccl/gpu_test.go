package nccl_test

import (
	"errors"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/loaderd/loaderd/trainer/cuda"
	"github.com/loaderd/loaderd/trainer/nccl"
	"github.com/loaderd/loaderd/trainer/parallel"
	"github.com/loaderd/loaderd/trainer/tensor"
)

// require fails under LOADERD_REQUIRE_GPU=1 (scripts/gpu-check.sh on a GPU
// machine, where libnccl comes with PyTorch's nvidia-nccl wheel) and skips
// elsewhere.
func require(t *testing.T, what string, err error) {
	t.Helper()
	if os.Getenv("LOADERD_REQUIRE_GPU") == "1" {
		t.Fatalf("LOADERD_REQUIRE_GPU=1: %s: %v", what, err)
	}
	t.Skipf("%s: %v", what, err)
}

// A one-rank communicator on a real GPU, through the bindings: every
// collective leaves the buffer as it was (the sum, the mean, the root's
// data of one rank), ordered on the device's stream with its kernels.
// What only several GPUs prove (data moving between ranks, NVLink) needs a
// multi-GPU machine; TestBindingsAgainstStandIn checks the arguments.
func TestOneRankOnGPU(t *testing.T) {
	g, err := cuda.New(cuda.Config{})
	if err != nil {
		if !errors.Is(err, cuda.ErrNoDriver) && !errors.Is(err, cuda.ErrNoDevice) {
			t.Fatal(err)
		}
		require(t, "no GPU", err)
	}
	defer g.Close()
	lib, err := nccl.Load("")
	if err != nil {
		require(t, "no libnccl", err)
	}
	id, err := lib.NewUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	c, err := lib.InitRank(g, 1, 0, id)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Destroy(); err != nil {
			t.Error(err)
		}
	}()
	const n = 100_003
	r := rand.New(rand.NewPCG(3, 4))
	want := make([]float32, n)
	for i := range want {
		want[i] = float32(r.NormFloat64())
	}
	b, err := g.Alloc(tensor.F32, n)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		op   func() error
	}{
		{"allreduce sum", func() error { return c.AllReduce(b, parallel.Sum) }},
		{"allreduce avg", func() error { return c.AllReduce(b, parallel.Avg) }},
		{"reduce sum", func() error { return c.Reduce(b, parallel.Sum, 0) }},
		{"broadcast", func() error { return c.Broadcast(b, 0) }},
	} {
		if err := g.CopyIn(b, want); err != nil {
			t.Fatal(err)
		}
		g.Scale(b, 2) // a kernel queued before the collective
		if err := tc.op(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		g.Scale(b, 0.5) // and one after it
		got := make([]float32, n)
		if err := g.CopyOut(got, b); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: [%d] = %v, want %v", tc.name, i, got[i], want[i])
			}
		}
	}
}
