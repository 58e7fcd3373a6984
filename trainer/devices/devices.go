package devices

import (
	"github.com/loaderd/loaderd/trainer/cuda/driver"

	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/loaderd/loaderd/trainer/tensor"
)

var (
	// ErrNoDriver reports that libnvidia-ml.so.1 could not be loaded.
	ErrNoDriver = errors.New("no NVIDIA driver found (libnvidia-ml.so.1)")
	// ErrNoCgo reports a build without cgo, which cannot use NVML.
	ErrNoCgo = errors.New("NVML not compiled in (built with CGO_ENABLED=0)")
	// ErrNVML wraps an NVML call that failed after the library loaded.
	ErrNVML = errors.New("NVML failed")
)

// GPU is one visible NVIDIA GPU. Index is NVML's (nvidia-smi's, and CUDA's
// with CUDA_DEVICE_ORDER=PCI_BUS_ID); Visible is its CUDA ordinal after
// CUDA_VISIBLE_DEVICES. Utilisation is in percent, −1 when unsupported.
type GPU struct {
	Visible     int    `json:"visible"`
	Index       int    `json:"index"`
	UUID        string `json:"uuid"`
	Name        string `json:"name"`
	MemoryTotal uint64 `json:"memory_total_bytes"`
	MemoryFree  uint64 `json:"memory_free_bytes"`
	UtilGPU     int    `json:"utilization_gpu_percent"`
	UtilMemory  int    `json:"utilization_memory_percent"`
}

// CPU is one CPU device: a goroutine budget standing in for an accelerator.
type CPU struct {
	Name       string `json:"name"`
	Goroutines int    `json:"goroutines"`
}

// Report is what Discover found.
type Report struct {
	Driver  string `json:"driver,omitempty"` // NVIDIA driver version
	Visible string `json:"cuda_visible_devices,omitempty"`
	GPUs    []GPU  `json:"gpus"`
	CPUs    []CPU  `json:"cpus"`
	Cores   int    `json:"cores"`
	// Convolutions says what will run the GPUs' convolutions: cuDNN with
	// its version and file, or the own kernels and why ("" without GPUs).
	Convolutions string `json:"convolutions,omitempty"`
	// NoGPU says why GPUs is empty ("" when it is not).
	NoGPU string `json:"no_gpu,omitempty"`
	// Err is the NVML problem behind NoGPU, if there was one (ErrNoDriver,
	// ErrNoCgo or ErrNVML); nil when NVML worked.
	Err error `json:"-"`
}

// Options choose the CPU devices listed; zero values pick the defaults of
// tensor.PlanCPU, which Train uses too.
type Options struct {
	CPUDevices int
	Goroutines int // per CPU device
}

// cpus lists the CPU devices tensor.PlanCPU picks for k and g.
func cpus(k, g int) []CPU {
	k, g = tensor.PlanCPU(k, g)
	out := make([]CPU, k)
	for i := range out {
		out[i] = CPU{Name: "cpu:" + strconv.Itoa(i), Goroutines: g}
	}
	return out
}

// Discover lists the GPUs visible to CUDA and the CPU devices.
func Discover(o Options) Report {
	r := Report{CPUs: cpus(o.CPUDevices, o.Goroutines), Cores: runtime.NumCPU()}
	visible, set := os.LookupEnv("CUDA_VISIBLE_DEVICES")
	if set {
		r.Visible = visible
	}
	driver, all, err := probe()
	switch {
	case err != nil:
		r.Err, r.NoGPU = err, err.Error()
	case len(all) == 0:
		r.Driver, r.NoGPU = driver, "no NVIDIA GPU found"
	default:
		r.Driver = driver
		r.GPUs = selectVisible(all, visible, set)
		if len(r.GPUs) == 0 {
			r.NoGPU = fmt.Sprintf("%d NVIDIA GPU(s) found, none visible with CUDA_VISIBLE_DEVICES=%q", len(all), visible)
		} else {
			r.Convolutions = convolutions()
		}
	}
	return r
}

// selectVisible applies CUDA_VISIBLE_DEVICES as CUDA does: a comma list of
// indices or UUIDs (or unique UUID prefixes), read up to the first entry
// that names no device (or one already named); unset means all, and an
// empty value none. MIG instances (MIG-…) are not GPUs here and end the list.
func selectVisible(all []GPU, value string, set bool) []GPU {
	if !set {
		out := append([]GPU(nil), all...)
		for i := range out {
			out[i].Visible = i
		}
		return out
	}
	var out []GPU
	used := map[int]bool{}
	for _, e := range strings.Split(value, ",") {
		e = strings.TrimSpace(e)
		i := lookup(all, e)
		if i < 0 || used[i] {
			break
		}
		used[i] = true
		g := all[i]
		g.Visible = len(out)
		out = append(out, g)
	}
	return out
}

// lookup returns the position in all of the GPU an entry names, or −1.
func lookup(all []GPU, e string) int {
	if e == "" {
		return -1
	}
	if n, err := strconv.Atoi(e); err == nil {
		for i, g := range all {
			if g.Index == n {
				return i
			}
		}
		return -1
	}
	if !strings.HasPrefix(e, "GPU-") {
		return -1
	}
	found := -1
	for i, g := range all {
		if strings.HasPrefix(g.UUID, e) {
			if found >= 0 {
				return -1 // ambiguous prefix
			}
			found = i
		}
	}
	return found
}

// WriteText prints the report the way people read `nvidia-smi -L`.
func (r Report) WriteText(w io.Writer) error {
	var b strings.Builder
	if len(r.GPUs) > 0 {
		fmt.Fprintf(&b, "NVIDIA driver %s", r.Driver)
		if r.Visible != "" {
			fmt.Fprintf(&b, ", CUDA_VISIBLE_DEVICES=%s", r.Visible)
		}
		fmt.Fprintf(&b, "\n%d GPU(s)\n", len(r.GPUs))
		for _, g := range r.GPUs {
			fmt.Fprintf(&b, "  gpu:%d  %s  %s  memory %s total, %s free  utilisation %s (memory %s)\n",
				g.Visible, g.Name, g.UUID, gib(g.MemoryTotal), gib(g.MemoryFree), pct(g.UtilGPU), pct(g.UtilMemory))
		}
		on := "cuda:0"
		if len(r.GPUs) > 1 {
			on = fmt.Sprintf("cuda:0..%d", len(r.GPUs)-1)
		}
		if r.Convolutions != "" {
			fmt.Fprintf(&b, "convolutions: %s\n", r.Convolutions)
		}
		fmt.Fprintf(&b, "trainer train --device auto trains on %s; with --device cpu on:\n", on)
	} else {
		fmt.Fprintf(&b, "%s: using CPU devices\n", r.NoGPU)
	}
	fmt.Fprintf(&b, "%d CPU device(s) on %d cores\n", len(r.CPUs), r.Cores)
	for _, c := range r.CPUs {
		fmt.Fprintf(&b, "  %s  %d goroutine(s)\n", c.Name, c.Goroutines)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON prints the report as one JSON object.
func (r Report) WriteJSON(w io.Writer) error {
	if r.GPUs == nil {
		r.GPUs = []GPU{}
	}
	return json.NewEncoder(w).Encode(r)
}

func gib(n uint64) string { return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30)) }

func pct(v int) string {
	if v < 0 {
		return "n/a"
	}
	return strconv.Itoa(v) + "%"
}

// convolutions loads cuDNN as trainer/cuda would and says what it found.
func convolutions() string {
	l, err := driver.LoadCUDNN(driver.Options{})
	if err != nil {
		return "own kernels (im2col + GEMM): " + err.Error()
	}
	defer l.Close()
	return fmt.Sprintf("cuDNN %s (%s)", l.VersionString(), l.Path())
}
