package cuda

import (
	"fmt"

	"github.com/loaderd/loaderd/trainer/cuda/driver"
	"github.com/loaderd/loaderd/trainer/tensor"
)

// Stream returns the device's CUDA stream, so that libraries such as NCCL
// enqueue their work in order with the device's kernels.
func (d *Device) Stream() driver.Stream { return d.stream }

// Pointer returns the device address of b's first element, or false (the
// error sticky for Sync) when b is not a live f32 buffer of d.
func (d *Device) Pointer(b tensor.Buffer) (driver.DevicePtr, bool) {
	return d.fp("pointer", b, -1)
}

// Do runs f with the device's context current on a locked OS thread, as
// foreign calls on the device's memory or stream need.
func (d *Device) Do(f func()) error {
	if !d.enter() {
		return fmt.Errorf("tensor: %s: %w", d.name, tensor.ErrClosed)
	}
	defer d.leave()
	f()
	return nil
}
