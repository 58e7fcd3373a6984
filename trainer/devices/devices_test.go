package devices

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

func fakeGPUs() []GPU {
	return []GPU{
		{Index: 0, UUID: "GPU-aaaa1111", Name: "A"},
		{Index: 1, UUID: "GPU-aaaa2222", Name: "B"},
		{Index: 2, UUID: "GPU-bbbb3333", Name: "C"},
	}
}

func TestSelectVisible(t *testing.T) {
	cases := []struct {
		value string
		set   bool
		want  string // names in visible order
	}{
		{"", false, "ABC"},
		{"", true, ""},
		{"2,0", true, "CA"},
		{" 1 , 2 ", true, "BC"},
		{"0,7,1", true, "A"}, // CUDA reads up to the first invalid entry
		{"-1", true, ""},
		{"1,1", true, "B"},
		{"GPU-bbbb3333", true, "C"},
		{"GPU-bb,0", true, "CA"}, // a unique prefix is enough
		{"GPU-aaaa", true, ""},   // ambiguous
		{"MIG-aaaa1111", true, ""},
		{"GPU-aaaa2222,2", true, "BC"},
	}
	for _, tc := range cases {
		var got string
		for i, g := range selectVisible(fakeGPUs(), tc.value, tc.set) {
			if g.Visible != i {
				t.Errorf("%q: %s has visible ordinal %d, want %d", tc.value, g.Name, g.Visible, i)
			}
			got += g.Name
		}
		if got != tc.want {
			t.Errorf("CUDA_VISIBLE_DEVICES=%q (set %v): %q, want %q", tc.value, tc.set, got, tc.want)
		}
	}
}

func TestCPUs(t *testing.T) {
	cases := []struct {
		k, g, wantK, wantG int
	}{
		{4, 3, 4, 3},
		{1, 0, 1, 0}, // wantG 0: GOMAXPROCS
	}
	for _, tc := range cases {
		list := cpus(tc.k, tc.g)
		if len(list) != tc.wantK {
			t.Fatalf("cpus(%d, %d): %d devices", tc.k, tc.g, len(list))
		}
		if tc.wantG > 0 && list[0].Goroutines != tc.wantG || list[0].Goroutines < 1 {
			t.Errorf("cpus(%d, %d): %d goroutines", tc.k, tc.g, list[0].Goroutines)
		}
		if list[len(list)-1].Name != fmt.Sprintf("cpu:%d", tc.wantK-1) {
			t.Errorf("last device %q", list[len(list)-1].Name)
		}
	}
}

// TestDiscoverHere checks the report on the machine the test runs on. On
// one without the NVIDIA library (CI, this project's machines) it must say
// so plainly and list the CPU devices; discovering twice checks that a
// failed NVML load is never followed by an NVML call, which would kill
// the test process.
func TestDiscoverHere(t *testing.T) {
	for range 2 {
		r := Discover(Options{CPUDevices: 2, Goroutines: 1})
		var out bytes.Buffer
		if err := r.WriteText(&out); err != nil {
			t.Fatal(err)
		}
		text := out.String()
		t.Logf("\n%s", text)
		switch {
		case !nvmlCompiled:
			if !errors.Is(r.Err, ErrNoCgo) || !strings.Contains(text, "NVML not compiled in (built with CGO_ENABLED=0): using CPU devices") {
				t.Errorf("without cgo: err %v, text %q", r.Err, text)
			}
		case len(r.GPUs) == 0 && !libraryPresent():
			if !errors.Is(r.Err, ErrNoDriver) || !strings.HasPrefix(text, "no NVIDIA driver found (libnvidia-ml.so.1): using CPU devices\n") {
				t.Errorf("no driver: err %v, text %q", r.Err, text)
			}
		case len(r.GPUs) > 0:
			if !strings.Contains(text, "gpu:0  "+r.GPUs[0].Name) || r.GPUs[0].MemoryTotal == 0 {
				t.Errorf("GPU listing %q", text)
			}
		}
		if !strings.Contains(text, "2 CPU device(s)") || !strings.Contains(text, "  cpu:0  1 goroutine(s)\n  cpu:1  1 goroutine(s)\n") {
			t.Errorf("CPU devices missing from %q", text)
		}
	}
}

// libraryPresent looks for libnvidia-ml.so.1 where the dynamic loader would.
func libraryPresent() bool {
	dirs := []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/lib/x86_64-linux-gnu"}
	dirs = append(dirs, strings.Split(os.Getenv("LD_LIBRARY_PATH"), ":")...)
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if _, err := os.Stat(d + "/libnvidia-ml.so.1"); err == nil {
			return true
		}
	}
	return false
}

func TestWriteGPUs(t *testing.T) {
	r := Report{Driver: "550.54.15", Visible: "1", Cores: 16, CPUs: cpus(2, 8), GPUs: []GPU{
		{Visible: 0, Index: 1, UUID: "GPU-1234", Name: "NVIDIA H100 80GB HBM3", MemoryTotal: 80 << 30, MemoryFree: 79 << 30, UtilGPU: 3, UtilMemory: -1}}}
	var out bytes.Buffer
	r.WriteText(&out)
	want := "NVIDIA driver 550.54.15, CUDA_VISIBLE_DEVICES=1\n1 GPU(s)\n" +
		"  gpu:0  NVIDIA H100 80GB HBM3  GPU-1234  memory 80.0 GiB total, 79.0 GiB free  utilisation 3% (memory n/a)\n" +
		"trainer train --device auto trains on cuda:0; with --device cpu on:\n2 CPU device(s) on 16 cores\n  cpu:0  8 goroutine(s)\n  cpu:1  8 goroutine(s)\n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
	out.Reset()
	if err := r.WriteJSON(&out); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(out.Bytes(), &back); err != nil || back.GPUs[0].MemoryFree != 79<<30 || back.CPUs[1].Name != "cpu:1" {
		t.Errorf("JSON %s: %v", out.String(), err)
	}
}
