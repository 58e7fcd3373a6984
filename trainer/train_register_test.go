package trainer

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/loaderd/loaderd/client"
	"github.com/loaderd/loaderd/client/clienttest"
	"github.com/loaderd/loaderd/trainer/nn"
	"github.com/loaderd/loaderd/trainer/tensor"
)

// registering is a CPU device standing in for a CUDA one: it records
// host registrations and checks that each is undone with the same memory,
// and that every batch trained on lies in registered memory.
type registering struct {
	tensor.Device
	mu   *sync.Mutex
	log  *[]string
	fail error
	live map[*byte]int
}

func (d *registering) RegisterHostReadOnly(mem []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fail != nil {
		return d.fail
	}
	*d.log = append(*d.log, "register "+d.Name())
	d.live[unsafe.SliceData(mem)] = len(mem)
	return nil
}

func (d *registering) UnregisterHost(mem []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if n, ok := d.live[unsafe.SliceData(mem)]; !ok || n != len(mem) {
		return errors.New("unregister of memory never registered")
	}
	delete(d.live, unsafe.SliceData(mem))
	*d.log = append(*d.log, "unregister "+d.Name())
	return nil
}

// With CUDA devices (stood in for) and shared memory, the trainer
// registers each stream's region with the device that reads it, read-only,
// every batch lies inside a registered region, and all is unregistered
// before the streams close; inline streams register nothing; a failed
// registration is reported and training goes on.
func TestRegistersSharedRegion(t *testing.T) {
	addr := clienttest.Start(t, "--workers", "2",
		"--dataset", "train=synthetic:128").Addr
	c, err := client.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tc := range []struct {
		name, mode string
		shm        bool
		fail       error
		want       string // the registration log
		note       string
	}{
		{"dp shm", "dp", true, nil, "register cuda:0,unregister cuda:0", "registered 1 shared region"},
		{"ddp shm", "ddp", true, nil, "register cuda:0,register cuda:1,unregister cuda:0,unregister cuda:1", "registered 2 shared region"},
		{"dp inline", "dp", false, nil, "", ""},
		{"dp shm refused", "dp", true, errors.New("CUDA_ERROR_NOT_SUPPORTED"), "", "cuMemHostRegister failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var calls []string
			var devs []*registering
			fakeCUDA(t, 1, nil, nil)
			old := asRegisterer
			defer func() { asRegisterer = old }()
			asRegisterer = func(dev tensor.Device) (hostRegisterer, bool) {
				if !strings.HasPrefix(dev.Name(), "cuda:") {
					return nil, false
				}
				d := &registering{Device: dev, mu: &mu, log: &calls, fail: tc.fail, live: map[*byte]int{}}
				devs = append(devs, d)
				return d, true
			}
			inRegion := 0
			undo := SetBatchHook(func(rank int, b *client.Batch) {
				mu.Lock()
				defer mu.Unlock()
				p := uintptr(unsafe.Pointer(unsafe.SliceData(b.Data)))
				for _, d := range devs {
					for base, n := range d.live {
						if lo := uintptr(unsafe.Pointer(base)); p >= lo && p+uintptr(len(b.Data)) <= lo+uintptr(n) {
							inRegion++
						}
					}
				}
			})
			defer undo()
			cfg := TrainConfig{Dataset: "train", Model: "cnn", Device: DeviceCUDA, Devices: 2, Goroutines: 1, Mode: tc.mode,
				CNN: nn.CNNConfig{Widths: []int{4}, Blocks: []int{1}, Classes: 10}, Batch: 32, Epochs: 1, Seed: 3,
				SharedMemory: tc.shm}
			cfg.EnsureDefaults()
			res, err := Train(context.Background(), c, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(calls, ","); got != tc.want {
				t.Errorf("registrations %q, want %q", got, tc.want)
			}
			if !strings.Contains(res.HostRegister, tc.note) || (tc.note == "") != (res.HostRegister == "") {
				t.Errorf("result says %q, want it to say %q", res.HostRegister, tc.note)
			}
			batches := int(res.Steps) * map[string]int{"dp": 1, "ddp": 2}[tc.mode]
			if wantIn := map[bool]int{true: batches}[tc.shm && tc.fail == nil]; inRegion != wantIn {
				t.Errorf("%d of %d batches in registered memory, want %d", inRegion, batches, wantIn)
			}
		})
	}
}

// coded stands in for a CUDA device that says how it loaded its kernels.
type coded struct {
	tensor.Device
	code string
}

func (c coded) Code() string { return c.code }

// The result names each distinct way the CUDA devices loaded their
// kernels (a CUBIN fallback must show in the run's record), nothing on CPU.
func TestKernelCode(t *testing.T) {
	cubin := "CUBIN sm_90 (the driver refused the PTX: CUresult 222)"
	for _, tc := range []struct {
		devs []tensor.Device
		want string
	}{
		{nil, ""},
		{[]tensor.Device{coded{code: "PTX"}, coded{code: "PTX"}}, "PTX"},
		{[]tensor.Device{coded{code: "PTX"}, coded{code: cubin}}, "PTX; " + cubin},
		{[]tensor.Device{&registering{}}, ""},
	} {
		if got := kernelCode(tc.devs); got != tc.want {
			t.Errorf("kernelCode(%d devices) = %q, want %q", len(tc.devs), got, tc.want)
		}
	}
}
