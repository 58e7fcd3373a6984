package cuda

import (
	"errors"
	"math"
	"testing"

	"github.com/loaderd/loaderd/trainer/cuda/driver"
	"github.com/loaderd/loaderd/trainer/tensor"
)

// oomRecovers fills the device until Alloc fails, checks that the failure
// is tensor.ErrOutOfMemory, frees everything and checks that the device
// still allocates and computes: what --batch auto relies on.
func oomRecovers(t *testing.T, d *Device) {
	var held []tensor.Buffer
	var err error
	for range 64 {
		var b tensor.Buffer
		if b, err = d.Alloc(tensor.F32, math.MaxInt32); err != nil {
			break
		}
		held = append(held, b)
	}
	if !errors.Is(err, tensor.ErrOutOfMemory) {
		t.Fatalf("after %d allocations of 8 GiB: %v, want ErrOutOfMemory", len(held), err)
	}
	for _, b := range held {
		if err := d.Free(b); err != nil {
			t.Fatal(err)
		}
	}
	x, err := d.Alloc(tensor.F32, 1024)
	if err != nil {
		t.Fatalf("alloc after recovering: %v", err)
	}
	d.Fill(x, 2)
	out := make([]float32, 1024)
	if err := d.CopyOut(out, x); err != nil || out[1023] != 2 {
		t.Fatalf("device after recovering: %v, %v", err, out[1023])
	}
}

func TestOutOfMemoryRecovers(t *testing.T) { oomRecovers(t, openGPU(t, Config{})) }

// The emulated driver runs out after 3 blocks of 8 GiB (nothing is mapped).
func TestEmulatedOutOfMemoryRecovers(t *testing.T) {
	d := openEmu(t, false)
	alloc, live := d.cu.MemAlloc, 0
	d.cu.MemAlloc = func(p *driver.DevicePtr, n uint64) driver.Result {
		if n >= 1<<32 {
			if live == 3 {
				return driver.ErrorOutOfMemory
			}
			live++
			*p = driver.DevicePtr(1<<40 + live<<33)
			return driver.Success
		}
		return alloc(p, n)
	}
	free, memset := d.cu.MemFree, d.cu.MemsetD32Async
	d.cu.MemFree = func(p driver.DevicePtr) driver.Result {
		if p >= 1<<40 {
			live--
			return driver.Success
		}
		return free(p)
	}
	d.cu.MemsetD32Async = func(p driver.DevicePtr, v uint32, n uint64, s driver.Stream) driver.Result {
		if p >= 1<<40 {
			return driver.Success
		}
		return memset(p, v, n, s)
	}
	oomRecovers(t, d)
	if live != 0 {
		t.Errorf("%d fake blocks still held", live)
	}
}
