//go:build cgo

package devices

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// nvmlCompiled says whether this build can reach NVML.
const nvmlCompiled = true

// probe lists every GPU NVML sees, in NVML order.
func probe() (driver string, gpus []GPU, err error) {
	ret := nvml.Init()
	if ret == nvml.ERROR_LIBRARY_NOT_FOUND {
		// Nothing else may be called now, Shutdown included: with the
		// library missing, any NVML symbol ends the process.
		return "", nil, ErrNoDriver
	}
	if ret != nvml.SUCCESS {
		return "", nil, fmt.Errorf("%w: init: %v", ErrNVML, ret)
	}
	defer nvml.Shutdown()
	driver, ret = nvml.SystemGetDriverVersion()
	if ret != nvml.SUCCESS {
		driver = "(unknown version)"
	}
	n, ret := nvml.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return driver, nil, fmt.Errorf("%w: device count: %v", ErrNVML, ret)
	}
	for i := range n {
		d, ret := nvml.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return driver, nil, fmt.Errorf("%w: device %d: %v", ErrNVML, i, ret)
		}
		g := GPU{Index: i, UtilGPU: -1, UtilMemory: -1}
		if g.Name, ret = d.GetName(); ret != nvml.SUCCESS {
			g.Name = "(unknown)"
		}
		g.UUID, _ = d.GetUUID()
		if m, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
			g.MemoryTotal, g.MemoryFree = m.Total, m.Free
		}
		if u, ret := d.GetUtilizationRates(); ret == nvml.SUCCESS {
			g.UtilGPU, g.UtilMemory = int(u.Gpu), int(u.Memory)
		}
		gpus = append(gpus, g)
	}
	return driver, gpus, nil
}
