package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loaderd/loaderd/client/clienttest"
	"github.com/loaderd/loaderd/trainer"
	"github.com/loaderd/loaderd/trainer/devices"
	"github.com/loaderd/loaderd/trainer/dist"
	"github.com/loaderd/loaderd/trainer/nn"
)

// TestMain lets the test binary act as the trainer command, so tests run
// the real main (NVML probing included) in a child process.
func TestMain(m *testing.M) {
	if os.Getenv("TRAINER_TEST_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runTrainer runs the command with args and returns stdout, stderr and
// the exit code.
func runTrainer(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "TRAINER_TEST_MAIN=1")
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// TestDevicesCommand runs `trainer devices` in its own process: without
// the NVIDIA library it must say so, list the CPU devices and exit 0 (a
// stray NVML call after the failed load would end it with status 127).
func TestDevicesCommand(t *testing.T) {
	out, errs, code := runTrainer(t, "devices", "--devices", "2", "--goroutines", "1")
	t.Logf("stdout:\n%s", out)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	if !strings.Contains(out, "  cpu:0  1 goroutine(s)\n  cpu:1  1 goroutine(s)\n") {
		t.Errorf("CPU devices not listed:\n%s", out)
	}
	if !strings.Contains(out, " GPU(s)\n") && !strings.Contains(out, ": using CPU devices\n") {
		t.Errorf("neither GPUs nor the reason for none:\n%s", out)
	}
	if _, err := os.Stat("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"); os.IsNotExist(err) &&
		!strings.HasPrefix(out, "no NVIDIA driver found (libnvidia-ml.so.1): using CPU devices\n") &&
		!strings.HasPrefix(out, "NVML not compiled in") {
		t.Errorf("no library here, but the output does not say so:\n%s", out)
	}
}

func startDaemon(t *testing.T) string {
	addr := clienttest.Start(t, "--workers", "2",
		"--dataset", "train=synthetic:256", "--dataset", "val=synthetic:64?seed=3").Addr
	return addr
}

// TestTrainCommand trains the MLP for one short epoch through the command,
// reads its JSON summary, then runs it again: the checkpoint says the run
// is finished, so nothing is trained twice.
func TestTrainCommand(t *testing.T) {
	addr := startDaemon(t)
	ckpt := filepath.Join(t.TempDir(), "mlp.ckpt")
	args := []string{"train", "--addr", addr, "--dataset", "train", "--eval", "val", "--model", "mlp",
		"--devices", "2", "--batch", "32", "--epochs", "1", "--checkpoint", ckpt, "--json", "--amp", "fp16"}
	for run := range 2 {
		out, errs, code := runTrainer(t, args...)
		if code != 0 {
			t.Fatalf("run %d: exit %d\n%s", run, code, errs)
		}
		var res trainer.TrainResult
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("run %d: %v\n%s", run, err, out)
		}
		wantImages := []int64{256, 0}[run]
		if !res.Done || res.Steps != 8 || res.Images != wantImages || len(res.Epochs) != 1 || res.Final() == nil ||
			res.AMP != "fp16" {
			t.Errorf("run %d: %s", run, out)
		}
		if run == 0 && !strings.Contains(errs, "epoch 1/1: train loss") {
			t.Errorf("no epoch line on stderr:\n%s", errs)
		}
	}
}

func TestTrainCommandRejectsFlags(t *testing.T) {
	_, errs, code := runTrainer(t, "train", "--model", "vgg", "--mode", "zero", "--transport", "tcp", "--lr", "-1", "--amp", "fp8")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	for _, w := range []string{`--transport "tcp"`, `model "vgg"`, `mode "zero"`, "lr -1", `amp: unknown mode "fp8"`} {
		if !strings.Contains(errs, w) {
			t.Errorf("stderr lacks %q:\n%s", w, errs)
		}
	}
}

// TestResolveDevice: --device auto follows what NVML sees (after
// CUDA_VISIBLE_DEVICES), and an unset --devices becomes one per GPU.
func TestResolveDevice(t *testing.T) {
	h100 := devices.GPU{Name: "NVIDIA H100", UUID: "GPU-1"}
	none := devices.Report{NoGPU: "no NVIDIA driver found (libnvidia-ml.so.1)"}
	two := devices.Report{GPUs: []devices.GPU{h100, h100}}
	mpi := &dist.Launch{World: 2, Launcher: dist.MPIRun}
	for _, tc := range []struct {
		name        string
		device      string
		devices     int
		launch      *dist.Launch
		report      devices.Report
		wantDevice  string
		wantDevices int
		wantLine    string
	}{
		{"auto without GPU", "auto", 0, nil, none, "cpu", 0, "device cpu (auto: no NVIDIA driver"},
		{"auto with two GPUs", "auto", 0, nil, two, "cuda", 2, "device cuda (auto: 2 GPU(s) visible, first NVIDIA H100 GPU-1)"},
		{"auto, devices set", "auto", 4, nil, two, "cuda", 4, "device cuda (auto"},
		{"auto under mpirun", "auto", 0, mpi, two, "cpu", 0, "device cpu (auto: one process per rank"},
		{"cpu forced", "cpu", 0, nil, two, "cpu", 0, "device cpu (asked for)"},
		{"cuda forced", "cuda", 0, nil, two, "cuda", 2, "device cuda (asked for)"},
		{"cuda forced, none seen", "cuda", 0, nil, none, "cuda", 0, "device cuda (asked for)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := trainConfig{Launch: tc.launch}
			c.Device, c.Devices = tc.device, tc.devices
			line := resolveDevice(&c, func(devices.Options) devices.Report { return tc.report })
			if c.Device != tc.wantDevice || c.Devices != tc.wantDevices || !strings.HasPrefix(line, tc.wantLine) {
				t.Errorf("device %q, %d devices, line %q; want %q, %d, %q…", c.Device, c.Devices, line,
					tc.wantDevice, tc.wantDevices, tc.wantLine)
			}
		})
	}
}

// TestCNNShapeFlags: --widths and --blocks reach the model, and a bad list
// is refused by the flag parser.
func TestCNNShapeFlags(t *testing.T) {
	var w []int
	if err := intList(&w)("64, 128,256"); err != nil || len(w) != 3 || w[0] != 64 || w[2] != 256 {
		t.Errorf("intList gave %v, %v", w, err)
	}
	for _, bad := range []string{"", "64,,128", "0", "-1", "x"} {
		if err := intList(&w)(bad); err == nil {
			t.Errorf("intList(%q) accepted: %v", bad, w)
		}
	}
	c := trainer.TrainConfig{Model: "cnn", CNN: nn.CNNConfig{Widths: []int{8, 16}}}
	c.EnsureDefaults()
	if len(c.CNN.Blocks) != 2 || c.CNN.Blocks[1] != 1 || c.CNN.Classes != 10 {
		t.Errorf("widths alone give %+v", c.CNN)
	}
	if err := c.Validate(); err != nil {
		t.Error(err)
	}
}
