package parallel

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/loaderd/loaderd/trainer/tensor"
)

func cpus(t testing.TB, k, workers int) []tensor.Device {
	t.Helper()
	devs := make([]tensor.Device, k)
	for i := range devs {
		d, err := tensor.NewCPU(fmt.Sprintf("cpu%d", i), workers)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		devs[i] = d
	}
	return devs
}

func upload(t testing.TB, d tensor.Device, v []float32) tensor.Buffer {
	t.Helper()
	b, err := d.Alloc(tensor.F32, len(v))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.CopyIn(b, v); err != nil {
		t.Fatal(err)
	}
	return b
}

func download(t testing.TB, d tensor.Device, b tensor.Buffer) []float32 {
	t.Helper()
	v := make([]float32, b.Len())
	if err := d.CopyOut(v, b); err != nil {
		t.Fatal(err)
	}
	return v
}

// onAll runs f for every rank concurrently and returns the errors.
func onAll(k int, f func(r int) error) []error {
	errs := make([]error, k)
	var wg sync.WaitGroup
	for r := range k {
		wg.Add(1)
		go func() { defer wg.Done(); errs[r] = f(r) }()
	}
	wg.Wait()
	return errs
}

func TestCollectives(t *testing.T) {
	for _, k := range []int{1, 2, 3, 4} {
		t.Run(fmt.Sprintf("K=%d", k), func(t *testing.T) {
			devs := cpus(t, k, 1)
			comms, err := NewHostGroup(devs)
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(uint64(k), 9))
			const n = 1001 // not divisible by K: ragged chunks
			in := make([][]float32, k)
			bufs := make([]tensor.Buffer, k)
			sum := make([]float64, n)
			for i := range k {
				in[i] = make([]float32, n)
				for j := range in[i] {
					in[i][j] = float32(r.NormFloat64())
					sum[j] += float64(in[i][j])
				}
			}
			reset := func() {
				for i := range k {
					bufs[i] = upload(t, devs[i], in[i])
				}
			}
			check := func(name string, errs []error, want func(rank, j int) float64) {
				t.Helper()
				for i, err := range errs {
					if err != nil {
						t.Fatalf("%s: rank %d: %v", name, i, err)
					}
				}
				first := download(t, devs[0], bufs[0])
				for i := range k {
					got := download(t, devs[i], bufs[i])
					for j, v := range got {
						if w := want(i, j); math.Abs(float64(v)-w) > 1e-5*(1+math.Abs(w)) {
							t.Fatalf("%s: rank %d [%d] = %g, want %g", name, i, j, v, w)
						}
						if want(i, j) == want(0, j) && math.Float32bits(v) != math.Float32bits(first[j]) {
							t.Fatalf("%s: rank %d differs from rank 0 in bits at %d", name, i, j)
						}
					}
				}
			}
			reset()
			check("allreduce sum", onAll(k, func(i int) error { return comms[i].AllReduce(bufs[i], Sum) }),
				func(_, j int) float64 { return sum[j] })
			reset()
			check("allreduce avg", onAll(k, func(i int) error { return comms[i].AllReduce(bufs[i], Avg) }),
				func(_, j int) float64 { return sum[j] / float64(k) })
			root := k - 1
			reset()
			check("reduce", onAll(k, func(i int) error { return comms[i].Reduce(bufs[i], Sum, root) }),
				func(i, j int) float64 {
					if i == root {
						return sum[j]
					}
					return float64(in[i][j])
				})
			reset()
			check("broadcast", onAll(k, func(i int) error { return comms[i].Broadcast(bufs[i], root) }),
				func(_, j int) float64 { return float64(in[root][j]) })
		})
	}
}

func TestCollectiveMismatchAndAbort(t *testing.T) {
	devs := cpus(t, 2, 1)
	comms, _ := NewHostGroup(devs)
	a, b := upload(t, devs[0], make([]float32, 4)), upload(t, devs[1], make([]float32, 5))
	errs := onAll(2, func(i int) error { return comms[i].AllReduce([]tensor.Buffer{a, b}[i], Sum) })
	for i, err := range errs {
		if !errors.Is(err, ErrMismatch) {
			t.Errorf("rank %d: err = %v, want ErrMismatch", i, err)
		}
	}
	// A rank that fails releases the other from its collective.
	done := make(chan error)
	go func() { done <- comms[0].AllReduce(a, Sum) }()
	time.Sleep(10 * time.Millisecond)
	cause := errors.New("rank 1 failed")
	comms[1].Abort(cause)
	select {
	case err := <-done:
		if !errors.Is(err, ErrAborted) || !errors.Is(err, cause) {
			t.Errorf("err = %v, want ErrAborted wrapping the cause", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("abort did not release the waiting rank")
	}
	if err := comms[0].Broadcast(a, 0); !errors.Is(err, ErrAborted) {
		t.Errorf("after abort: err = %v", err)
	}
}
