package driver

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loaderd/loaderd/trainer/internal/dynlib"
)

func TestOpenMissingIsTypedError(t *testing.T) {
	dir := t.TempDir()
	_, err := open("test lib", Options{Path: dir}, []string{"libloaderd-missing.so.1"}, nil)
	var le *LibError
	if !errors.As(err, &le) || !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v, want *LibError wrapping ErrNotFound", err)
	}
	for _, want := range []string{"no test lib", "libloaderd-missing.so.1", dir} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err.Error(), want)
		}
	}
}

func TestLoadCUDA(t *testing.T) {
	c, err := LoadCUDA(Options{})
	if err != nil {
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("LoadCUDA without a driver: %v, want ErrNotFound", err)
		}
		if !strings.Contains(err.Error(), "no CUDA driver: libcuda.so.1") {
			t.Fatalf("message %q", err)
		}
		return
	}
	// A machine with a driver: the bindings must work.
	if err := c.Check("cuInit", c.Init(0)); err != nil {
		t.Fatal(err)
	}
	var v int32
	if err := c.Check("cuDriverGetVersion", c.DriverGetVersion(&v)); err != nil || v < 11000 {
		t.Fatalf("driver version %d: %v", v, err)
	}
}

// A missing symbol must be an error, not purego's panic.
func TestBindMissingSymbol(t *testing.T) {
	l, err := open("libc", Options{}, []string{"libc.so.6"}, nil)
	if err != nil {
		t.Skipf("no libc.so.6 to test with: %v", err) // non-glibc systems
	}
	defer l.close()
	var f func() int32
	err = l.bind([]dynlib.Func{{Ptr: &f, Name: "loaderd_no_such_function"}})
	if !errors.Is(err, ErrSymbol) || f != nil {
		t.Fatalf("bind missing symbol: err %v, f set %v", err, f != nil)
	}
	var getpid func() int32
	if err := l.bind([]dynlib.Func{{Ptr: &getpid, Name: "getpid"}}); err != nil {
		t.Fatal(err)
	}
	if got := getpid(); int(got) != os.Getpid() {
		t.Fatalf("getpid() = %d, want %d", got, os.Getpid())
	}
}

func TestCandidatesOrder(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "libfake.so.1")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, "lib64"), 0o755); err != nil {
		t.Fatal(err)
	}
	inHome := filepath.Join(home, "lib64", "libfake.so.1")
	if err := os.WriteFile(inHome, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CUDA_HOME", home)
	tests := []struct {
		name string
		opt  Options
		want []string
	}{
		{"flag file first", Options{Path: file}, []string{file, file, inHome}},
		{"flag dir", Options{Path: dir}, []string{file, inHome}},
		{"CUDA_HOME", Options{}, []string{inHome}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := candidates(tc.opt, []string{"libfake.so.1"})
			if len(got) < len(tc.want) {
				t.Fatalf("got %v, want prefix %v", got, tc.want)
			}
			for i, w := range tc.want {
				if got[i] != w {
					t.Fatalf("got %v, want prefix %v", got, tc.want)
				}
			}
			if got[len(tc.want)] != "libfake.so.1" {
				t.Fatalf("bare name not tried after dirs: %v", got)
			}
		})
	}
}

// RequireNVRTC reports whether the environment demands NVRTC (CI sets
// LOADERD_REQUIRE_NVRTC=1), so that its absence fails instead of skipping.
func requireNVRTC() bool { return os.Getenv("LOADERD_REQUIRE_NVRTC") == "1" }

func TestNVRTCCompile(t *testing.T) {
	n, err := LoadNVRTC(Options{})
	if err != nil {
		if requireNVRTC() {
			t.Fatalf("LOADERD_REQUIRE_NVRTC=1 but %v (run scripts/nvrtc-setup.sh)", err)
		}
		t.Skipf("%v; run scripts/nvrtc-setup.sh, set LOADERD_REQUIRE_NVRTC=1 to make this fail", err)
	}
	maj, min, err := n.Version()
	if err != nil || maj < 11 {
		t.Fatalf("version %d.%d: %v", maj, min, err)
	}
	src := `extern "C" __global__ void k(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] *= 2.0f; }`
	ptx, _, err := n.Compile(src, "k.cu", []string{"--gpu-architecture=compute_80"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ptx), ".entry k(") || ptx[len(ptx)-1] != 0 {
		t.Fatalf("PTX lacks .entry k or trailing NUL:\n%s", ptx)
	}
	_, log, err := n.Compile("this is not CUDA", "bad.cu", nil)
	var ce *CompileError
	if !errors.As(err, &ce) || log == "" || !strings.Contains(err.Error(), "bad.cu") {
		t.Fatalf("bad source: err %v, log %q", err, log)
	}

	// CUBIN: machine code for a real architecture, an ELF image holding
	// the kernel's name; a virtual architecture has none to give.
	cubin, _, err := n.CompileCUBIN(src, "k.cu", []string{"--gpu-architecture=sm_80"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(cubin, []byte("\x7fELF")) || !bytes.Contains(cubin, []byte("k\x00")) {
		t.Fatalf("CUBIN (%d bytes) is not an ELF image naming k", len(cubin))
	}
	if _, _, err := n.CompileCUBIN(src, "k.cu", []string{"--gpu-architecture=compute_80"}); !errors.As(err, &ce) || !strings.Contains(err.Error(), "cubin") {
		t.Fatalf("CUBIN for a virtual architecture: %v, want a CompileError from the cubin step", err)
	}
}

func TestLoadCUBLAS(t *testing.T) {
	c, err := LoadCUBLAS(Options{})
	if err != nil {
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "no cuBLAS") {
			t.Fatalf("LoadCUBLAS without cuBLAS: %v, want ErrNotFound", err)
		}
		return
	}
	if c.Sgemm == nil || c.GemmEx == nil || c.Create == nil || c.SetStream == nil {
		t.Fatal("cuBLAS loaded with unbound functions")
	}
}

func TestExclusiveSearchesOnlyPath(t *testing.T) {
	dir := t.TempDir()
	got := candidates(Options{Path: dir, Exclusive: true}, []string{"libc.so.6"})
	if len(got) != 0 {
		t.Fatalf("exclusive search of an empty dir tried %v", got)
	}
	_, err := LoadCUDA(Options{Path: dir, Exclusive: true})
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "no CUDA driver: libcuda.so.1") {
		t.Fatalf("err = %v", err)
	}
}

func TestGlobSkipsUnversioned(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"libx.so.11.8.89", "libx.so.12", "libx.so.12.bak", "libx.so.1.hidden"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := candidates(Options{Path: dir, Exclusive: true}, []string{"libx.so.*"})
	want := []string{filepath.Join(dir, "libx.so.12"), filepath.Join(dir, "libx.so.11.8.89")}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("candidates %v, want %v", got, want)
	}
}
