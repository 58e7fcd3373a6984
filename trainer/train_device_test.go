package trainer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/loaderd/loaderd/client"
	"github.com/loaderd/loaderd/client/clienttest"
	"github.com/loaderd/loaderd/trainer/cuda"
	"github.com/loaderd/loaderd/trainer/nn"
	"github.com/loaderd/loaderd/trainer/tensor"
)

// fakeCUDA makes openDevices see gpus GPUs and hands out CPU devices in
// place of CUDA ones, recording the ordinals asked for.
func fakeCUDA(t *testing.T, gpus int, countErr, openErr error) *[]int {
	t.Helper()
	var ordinals []int
	oldCount, oldOpen := cudaCount, openCUDA
	t.Cleanup(func() { cudaCount, openCUDA = oldCount, oldOpen })
	cudaCount = func() (int, error) { return gpus, countErr }
	openCUDA = func(cfg cuda.Config) (tensor.Device, error) {
		if openErr != nil {
			return nil, openErr
		}
		ordinals = append(ordinals, cfg.Ordinal)
		return tensor.NewCPU(cfg.Name, 1)
	}
	return &ordinals
}

func TestOpenDevicesSpreadsOverGPUs(t *testing.T) {
	for _, tc := range []struct {
		gpus, k  int
		ordinals []int
	}{
		{1, 1, []int{0}},
		{1, 2, []int{0, 0}}, // two streams on one GPU
		{2, 2, []int{0, 1}},
		{2, 3, []int{0, 1, 0}},
		{4, 2, []int{0, 1}},
	} {
		t.Run(fmt.Sprintf("gpus=%d/k=%d", tc.gpus, tc.k), func(t *testing.T) {
			got := fakeCUDA(t, tc.gpus, nil, nil)
			devs, err := openDevices(&TrainConfig{Device: DeviceCUDA, Devices: tc.k}, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer closeDevices(devs)
			if !slices.Equal(*got, tc.ordinals) {
				t.Errorf("ordinals %v, want %v", *got, tc.ordinals)
			}
			for i, d := range devs {
				if want := fmt.Sprintf("cuda:%d", i); d.Name() != want {
					t.Errorf("device %d named %q, want %q", i, d.Name(), want)
				}
			}
		})
	}
}

// --tf32 reaches every CUDA device's Config.
func TestOpenDevicesTF32(t *testing.T) {
	for _, tf32 := range []bool{false, true} {
		fakeCUDA(t, 1, nil, nil)
		var got []bool
		open := openCUDA
		openCUDA = func(cfg cuda.Config) (tensor.Device, error) {
			got = append(got, cfg.TF32)
			return open(cfg)
		}
		devs, err := openDevices(&TrainConfig{Device: DeviceCUDA, Devices: 2, TF32: tf32}, 1)
		if err != nil {
			t.Fatal(err)
		}
		closeDevices(devs)
		if !slices.Equal(got, []bool{tf32, tf32}) {
			t.Errorf("--tf32=%v: devices opened with TF32 %v", tf32, got)
		}
	}
}

func TestOpenDevicesWithoutCUDA(t *testing.T) {
	other := errors.New("nvrtc exploded")
	for _, tc := range []struct {
		name              string
		gpus              int
		countErr, openErr error
		noCUDA            bool
	}{
		{"no driver", 0, fmt.Errorf("cuda: %w", cuda.ErrNoDriver), nil, true},
		{"no GPU visible", 0, nil, nil, true},
		{"device vanished", 1, nil, fmt.Errorf("x: %w", cuda.ErrNoDevice), true},
		{"other failure", 1, nil, other, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fakeCUDA(t, tc.gpus, tc.countErr, tc.openErr)
			devs, err := openDevices(&TrainConfig{Device: DeviceCUDA, Devices: 2}, 1)
			if err == nil {
				closeDevices(devs)
				t.Fatal("opened devices")
			}
			if errors.Is(err, ErrNoCUDA) != tc.noCUDA {
				t.Errorf("errors.Is(%v, ErrNoCUDA) = %v, want %v", err, !tc.noCUDA, tc.noCUDA)
			}
			if tc.openErr == other && !errors.Is(err, other) {
				t.Errorf("%v does not wrap the cause", err)
			}
		})
	}
}

func TestDeviceConfig(t *testing.T) {
	c := TrainConfig{Device: DeviceCUDA}
	c.EnsureDefaults()
	if c.Devices != 1 {
		t.Errorf("cuda defaults to %d devices, want 1", c.Devices)
	}
	c = TrainConfig{}
	c.EnsureDefaults()
	if c.Device != DeviceCPU {
		t.Errorf("default device %q, want cpu", c.Device)
	}
	c.Device = "tpu"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), `device "tpu"`) {
		t.Errorf("Validate of device tpu: %v", err)
	}
}

// Train routes Device "cuda" through openDevices: with CPU devices standing
// in, the run is the CPU run to the last bit, and reports cuda.
func TestTrainOnCUDADevices(t *testing.T) {
	addr := clienttest.Start(t, "--workers", "2",
		"--dataset", "train=synthetic:256").Addr
	c, err := client.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	run := func(device string) *TrainResult {
		cfg := TrainConfig{Dataset: "train", Model: "cnn", Device: device, Devices: 2, Goroutines: 1,
			CNN: nn.CNNConfig{Widths: []int{4}, Blocks: []int{1}, Classes: 10}, Batch: 32, Epochs: 1, Seed: 3}
		cfg.EnsureDefaults()
		res, err := Train(context.Background(), c, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	got := fakeCUDA(t, 1, nil, nil)
	onCUDA := run(DeviceCUDA)
	if !slices.Equal(*got, []int{0, 0}) || onCUDA.Device != DeviceCUDA {
		t.Fatalf("opened GPU ordinals %v, result device %q", *got, onCUDA.Device)
	}
	onCPU := run(DeviceCPU)
	if onCPU.Device != DeviceCPU || onCUDA.Epochs[0].Loss != onCPU.Epochs[0].Loss {
		t.Errorf("loss %v on stand-in cuda, %v on cpu (%q): want equal", onCUDA.Epochs[0].Loss,
			onCPU.Epochs[0].Loss, onCPU.Device)
	}
}
