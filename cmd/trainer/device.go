package main

import (
	"fmt"

	"github.com/loaderd/loaderd/trainer"
	"github.com/loaderd/loaderd/trainer/devices"
)

// deviceAuto is --device's default: CUDA when NVML sees a GPU.
const deviceAuto = "auto"

// resolveDevice turns --device auto into cpu or cuda. NVML decides, with
// CUDA_VISIBLE_DEVICES applied (devices.Discover); a run started by
// mpirun stays on the CPU, whose ranks all-reduce through MPI. When
// --devices is unset on CUDA, each visible GPU gets one device. It returns
// a line saying what was chosen and why.
func resolveDevice(c *trainConfig, discover func(devices.Options) devices.Report) string {
	if c.Device != deviceAuto {
		if c.Device == trainer.DeviceCUDA && c.Devices == 0 && !c.multi() {
			if r := discover(devices.Options{}); len(r.GPUs) > 0 {
				c.Devices = len(r.GPUs)
			}
		}
		return fmt.Sprintf("device %s (asked for)", c.Device)
	}
	if c.multi() {
		c.Device = trainer.DeviceCPU
		return "device cpu (auto: one process per rank, MPI all-reduce)"
	}
	r := discover(devices.Options{})
	if len(r.GPUs) == 0 {
		c.Device = trainer.DeviceCPU
		return fmt.Sprintf("device cpu (auto: %s)", r.NoGPU)
	}
	c.Device = trainer.DeviceCUDA
	if c.Devices == 0 {
		c.Devices = len(r.GPUs)
	}
	return fmt.Sprintf("device cuda (auto: %d GPU(s) visible, first %s %s)", len(r.GPUs), r.GPUs[0].Name, r.GPUs[0].UUID)
}
