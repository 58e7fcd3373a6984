package trainer

import (
	"fmt"
	"log"
	"strings"

	"github.com/loaderd/loaderd/client"
	"github.com/loaderd/loaderd/trainer/cuda"
	"github.com/loaderd/loaderd/trainer/tensor"
)

// hostRegisterer is a device that can page-lock host memory for DMA:
// *cuda.Device. CPU devices are not.
type hostRegisterer interface {
	RegisterHostReadOnly(mem []byte) error
	UnregisterHost(mem []byte) error
}

// asRegisterer finds d's registration methods; tests replace it (a device
// wrapping a CPU one would not pass the host collective's device checks).
var asRegisterer = func(d tensor.Device) (hostRegisterer, bool) {
	r, ok := d.(hostRegisterer)
	return r, ok
}

// registration is one shared region page-locked with one device.
type registration struct {
	dev hostRegisterer
	mem []byte
}

// registerRegions page-locks the daemon's shared-memory region of each
// stream with the device that reads it (stream i feeds devs[i]: DataParallel
// has one stream, scattered from device 0's side, DDP one per device), so
// host-to-device copies of batches are DMA from the daemon's pages. The
// registration is portable, so DataParallel's other devices copy from it by
// DMA too. A failure costs speed, not correctness: one log line, and copies
// stay pageable. It returns what to unregister and one line for the result.
func registerRegions(streams []*client.Stream, devs []tensor.Device) ([]registration, string) {
	var regs []registration
	var fails []string
	var bytes int
	for i, s := range streams {
		mem := s.Region()
		if mem == nil || i >= len(devs) {
			continue
		}
		hr, ok := asRegisterer(devs[i])
		if !ok {
			continue
		}
		if err := hr.RegisterHostReadOnly(mem); err != nil {
			fails = append(fails, fmt.Sprintf("%s: %v", devs[i].Name(), err))
			continue
		}
		regs = append(regs, registration{hr, mem})
		bytes += len(mem)
	}
	var note string
	switch {
	case len(fails) > 0:
		note = fmt.Sprintf("cuMemHostRegister failed, batches copied from pageable memory: %s", strings.Join(fails, "; "))
		log.Printf("trainer: %s", note)
	case len(regs) > 0:
		note = fmt.Sprintf("registered %d shared region(s), %.1f MiB, read-only with cuMemHostRegister: batch copies are DMA",
			len(regs), float64(bytes)/(1<<20))
	}
	return regs, note
}

// unregisterRegions undoes registerRegions, before the streams unmap.
func unregisterRegions(regs []registration) {
	for _, r := range regs {
		// The device may be closing after an error; nothing to do then.
		_ = r.dev.UnregisterHost(r.mem)
	}
}

var _ hostRegisterer = (*cuda.Device)(nil)
