package trainer

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/loaderd/loaderd/trainer/cuda"
	"github.com/loaderd/loaderd/trainer/tensor"
)

// Device kinds of TrainConfig.Device.
const (
	DeviceCPU  = "cpu"  // tensor.CPU devices: goroutine budgets on the host
	DeviceCUDA = "cuda" // trainer/cuda devices: one CUDA stream each
)

// ErrNoCUDA reports a run that asked for CUDA devices where none can be
// opened (no driver, no GPU visible); it wraps the cause.
var ErrNoCUDA = errors.New("trainer: no CUDA device")

// openCUDA opens a logical CUDA device (cfg's Name, Ordinal and TF32);
// tests replace it. Several logical devices may share one GPU: each is its
// own stream.
var openCUDA = func(cfg cuda.Config) (tensor.Device, error) { return cuda.New(cfg) }

// cudaCount reports how many GPUs the CUDA driver sees (after
// CUDA_VISIBLE_DEVICES); tests replace it.
var cudaCount = cuda.Count

// openDevices makes cfg.Devices devices of cfg.Device's kind: CPU devices
// of g goroutines each, or CUDA devices spread round-robin over the
// visible GPUs (K above the GPU count puts several streams on one GPU,
// which is how the one-GPU machines prove K-device training).
func openDevices(cfg *TrainConfig, g int) ([]tensor.Device, error) {
	if cfg.Device != DeviceCUDA {
		return newDevices(cfg.Devices, g)
	}
	n, err := cudaCount()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoCUDA, err)
	}
	if n < 1 {
		return nil, fmt.Errorf("%w: the driver sees no GPU (CUDA_VISIBLE_DEVICES?)", ErrNoCUDA)
	}
	var devs []tensor.Device
	for i := range cfg.Devices {
		d, err := openCUDA(cuda.Config{Name: fmt.Sprintf("cuda:%d", i), Ordinal: i % n, TF32: cfg.TF32})
		if err != nil {
			closeDevices(devs)
			if errors.Is(err, cuda.ErrNoDriver) || errors.Is(err, cuda.ErrNoDevice) {
				return nil, fmt.Errorf("%w: %w", ErrNoCUDA, err)
			}
			return nil, fmt.Errorf("trainer: device cuda:%d (GPU %d): %w", i, i%n, err)
		}
		devs = append(devs, d)
	}
	return devs, nil
}

// kernelCode reports how the CUDA devices loaded their kernels (each
// device's Code, once per distinct answer); "" without CUDA devices.
func kernelCode(devs []tensor.Device) string {
	var codes []string
	for _, d := range devs {
		if c, ok := d.(interface{ Code() string }); ok && !slices.Contains(codes, c.Code()) {
			codes = append(codes, c.Code())
		}
	}
	return strings.Join(codes, "; ")
}

// convEngine reports what runs the CUDA devices' convolutions (each
// device's CUDNN, once per distinct answer); "" without CUDA devices.
func convEngine(devs []tensor.Device) string {
	var out []string
	for _, d := range devs {
		if c, ok := d.(interface{ CUDNN() string }); ok && !slices.Contains(out, c.CUDNN()) {
			out = append(out, c.CUDNN())
		}
	}
	return strings.Join(out, "; ")
}
