package kernels

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/loaderd/loaderd/trainer/cuda/driver"
)

// want lists every kernel the CUDA device launches, by source file.
var want = map[string][]string{
	"conv.cu": {"col2im_f32", "im2col_f32", "maxpool_backward_f32", "maxpool_f32"},
	"elem.cu": {"add_bias_f32", "add_f32", "axpy_f32", "bn_backward_f32", "bn_forward_f32",
		"bn_invstd_f32", "bn_running_f32", "div_scalar_f32", "fill_f32", "relu_backward_f32",
		"relu_f32", "row_broadcast_f32", "scale_f32", "sgd_f32", "transpose12_f32"},
	"gemm.cu":   {"gemm_f32", "scale_matrix_f32"},
	"half.cu":   {"nonfinite_f32", "round_f32"},
	"loss.cu":   {"softmax_ce_backward_f32", "softmax_ce_f32"},
	"reduce.cu": {"bn_grad_sums_f32", "channel_parts_f32", "channel_sqdev_f32", "channel_sum_f32", "count_correct_f32", "row_sum_f32"},
}

func TestSourcesDeclareExpectedKernels(t *testing.T) {
	got := map[string][]string{}
	for _, s := range Sources() {
		got[s.File] = s.Entries
	}
	if len(got) != len(want) {
		t.Fatalf("sources %v, want files %v", keys(got), keys(want))
	}
	for f, w := range want {
		if !slices.Equal(got[f], w) {
			t.Errorf("%s declares %v, want %v", f, got[f], w)
		}
	}
}

func keys(m map[string][]string) []string {
	var k []string
	for f := range m {
		k = append(k, f)
	}
	slices.Sort(k)
	return k
}

// nvrtc loads NVRTC; it fails the test when LOADERD_REQUIRE_NVRTC=1 (CI)
// and skips it otherwise.
func nvrtc(t *testing.T) *driver.NVRTC {
	t.Helper()
	n, err := driver.LoadNVRTC(driver.Options{})
	if err != nil {
		if os.Getenv("LOADERD_REQUIRE_NVRTC") == "1" {
			t.Fatalf("LOADERD_REQUIRE_NVRTC=1 but %v (run scripts/nvrtc-setup.sh)", err)
		}
		t.Skipf("%v; run scripts/nvrtc-setup.sh, set LOADERD_REQUIRE_NVRTC=1 to make this fail", err)
	}
	return n
}

// Every embedded kernel must compile for Ampere and Hopper and appear as
// an .entry of the PTX.
func TestCompileEveryKernel(t *testing.T) {
	n := nvrtc(t)
	for _, arch := range []string{"compute_80", "compute_90"} {
		t.Run(arch, func(t *testing.T) {
			ptx, err := Build(n, arch, nil) // always compile: no cache
			if err != nil {
				t.Fatal(err)
			}
			// LOADERD_PTX_CACHE=dir keeps the PTX for a GPU machine without NVRTC.
			if dir := os.Getenv(CacheEnv); dir != "" {
				c := &Cache{Dir: dir}
				for _, s := range Sources() {
					if err := c.Store(Key(s, Options(arch)), ptx[s.File]); err != nil {
						t.Fatal(err)
					}
				}
			}
			for f, names := range want {
				p := ptx[f]
				if !strings.Contains(string(p), ".target sm_"+strings.TrimPrefix(arch, "compute_")) {
					t.Errorf("%s: PTX not for %s", f, arch)
				}
				for _, name := range names {
					if !strings.Contains(string(p), ".entry "+name+"(") {
						t.Errorf("%s for %s: no .entry %s", f, arch, name)
					}
				}
			}
		})
	}
}

// fakeCompiler returns PTX-looking text with the declared entries.
type fakeCompiler struct{ calls int }

func (f *fakeCompiler) Compile(src, name string, opts []string) ([]byte, string, error) {
	f.calls++
	var b strings.Builder
	fmt.Fprintf(&b, "// %s %v\n", name, opts)
	for _, m := range globalRE.FindAllStringSubmatch(src, -1) {
		fmt.Fprintf(&b, ".visible .entry %s(\n)\n{\n}\n", m[1])
	}
	b.WriteByte(0)
	return []byte(b.String()), "", nil
}

func TestBuildCache(t *testing.T) {
	c := &Cache{Dir: t.TempDir()}
	f := &fakeCompiler{}
	nsrc := len(Sources())
	steps := []struct {
		name  string
		arch  string
		prep  func()
		calls int // compiles expected in this step
	}{
		{"cold", "compute_80", nil, nsrc},
		{"warm", "compute_80", nil, 0},
		{"other arch", "compute_90", nil, nsrc},
		{"truncated file recompiles", "compute_80", func() {
			m, _ := filepath.Glob(filepath.Join(c.Dir, "elem-compute_80-*.ptx"))
			if len(m) != 1 {
				t.Fatalf("cache files %v", m)
			}
			os.WriteFile(m[0], []byte(".visible .entry fill_f32("), 0o644)
		}, 1},
	}
	for _, s := range steps {
		if s.prep != nil {
			s.prep()
		}
		before := f.calls
		ptx, err := Build(f, s.arch, c)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := f.calls - before; got != s.calls || len(ptx) != nsrc {
			t.Fatalf("%s: %d compiles, %d PTX; want %d, %d", s.name, got, len(ptx), s.calls, nsrc)
		}
	}
	// Without a compiler, a warm cache still serves.
	if _, err := Build(nil, "compute_90", c); err != nil {
		t.Fatalf("cached build without compiler: %v", err)
	}
	if _, err := Build(nil, "compute_75", c); !errors.Is(err, ErrCompile) {
		t.Fatalf("uncached build without compiler: %v, want ErrCompile", err)
	}
}

type badCompiler struct{}

func (badCompiler) Compile(string, string, []string) ([]byte, string, error) {
	return []byte(".visible .entry other(\x00"), "", nil
}

func TestBuildRejectsMissingEntry(t *testing.T) {
	if _, err := Build(badCompiler{}, "compute_80", nil); !errors.Is(err, ErrCompile) ||
		!strings.Contains(err.Error(), "lacks .entry") {
		t.Fatalf("err = %v", err)
	}
}

func TestDefaultCache(t *testing.T) {
	t.Setenv(CacheEnv, "")
	t.Setenv("XDG_CACHE_HOME", "/tmp/xdg-test")
	c, err := DefaultCache()
	if err != nil || c.Dir != "/tmp/xdg-test/loaderd/ptx" {
		t.Fatalf("DefaultCache = %+v, %v", c, err)
	}
	t.Setenv(CacheEnv, "/srv/ptx")
	if c, err := DefaultCache(); err != nil || c.Dir != "/srv/ptx" {
		t.Fatalf("DefaultCache with %s = %+v, %v", CacheEnv, c, err)
	}
}

func ExampleArch() {
	fmt.Println(Arch(9, 0), Options(Arch(8, 0))[0])
	// Output: compute_90 --gpu-architecture=compute_80
}

func TestCompileEveryKernelCUBIN(t *testing.T) {
	n := nvrtc(t)
	for _, s := range Sources() {
		b, err := BuildCUBIN(n, s, "sm_90", nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range s.Entries {
			if !bytes.Contains(b, []byte(name+"\x00")) {
				t.Errorf("%s for sm_90: CUBIN lacks the symbol %s", s.File, name)
			}
		}
	}
}

// fakeBinary returns an ELF-looking image, or text when bad is set.
type fakeBinary struct {
	calls int
	bad   bool
}

func (f *fakeBinary) CompileCUBIN(src, name string, opts []string) ([]byte, string, error) {
	f.calls++
	if f.bad {
		return []byte(".visible .entry k(\x00"), "", nil
	}
	return []byte(fmt.Sprintf("\x7fELF %s %v\x00", name, opts)), "", nil
}

func TestBuildCUBINCache(t *testing.T) {
	c := &Cache{Dir: t.TempDir()}
	f := &fakeBinary{}
	s := Sources()[0]
	for i, want := range []int{1, 0} { // cold, then warm
		before := f.calls
		b, err := BuildCUBIN(f, s, "sm_90", c)
		if err != nil || !bytes.Contains(b, []byte("sm_90")) {
			t.Fatalf("build %d: %q, %v", i, b, err)
		}
		if got := f.calls - before; got != want {
			t.Fatalf("build %d: %d compiles, want %d", i, got, want)
		}
	}
	if _, ok := c.Load(Key(s, Options("sm_90"))); ok {
		t.Fatal("a CUBIN was served as PTX")
	}
	if _, err := BuildCUBIN(nil, s, "sm_90", c); err != nil {
		t.Fatalf("cached CUBIN without compiler: %v", err)
	}
	if _, err := BuildCUBIN(nil, s, "sm_80", c); !errors.Is(err, ErrCompile) {
		t.Fatalf("uncached CUBIN without compiler: %v, want ErrCompile", err)
	}
	if _, err := BuildCUBIN(&fakeBinary{bad: true}, s, "sm_80", c); !errors.Is(err, ErrCompile) || !strings.Contains(err.Error(), "not an ELF") {
		t.Fatalf("non-ELF CUBIN: %v, want ErrCompile", err)
	}
}
