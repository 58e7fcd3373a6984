package devices_test

import (
	"fmt"

	"github.com/loaderd/loaderd/trainer/devices"
)

func ExampleDiscover() {
	r := devices.Discover(devices.Options{CPUDevices: 2, Goroutines: 1})
	for _, g := range r.GPUs {
		fmt.Printf("gpu:%d %s, %d MiB free\n", g.Visible, g.Name, g.MemoryFree>>20)
	}
	fmt.Println("CPU devices:", len(r.CPUs), r.CPUs[0].Name, r.CPUs[1].Name)
	// Output on a machine without GPUs:
	// CPU devices: 2 cpu:0 cpu:1
}
