//go:build linux && (amd64 || arm64)

package driver

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"unsafe"

	"github.com/loaderd/loaderd/trainer/internal/dynlib"
)

// fakeC records the arguments of the calls that go through
// purego.SyscallN, so the hand-written ABI (11 arguments, 5 on the stack
// on amd64) is checked against a C compiler's view without a GPU.
const fakeC = `
#include <stdint.h>
#include <stddef.h>
static uint64_t got[11];
uint64_t* fake_got(void) { return got; }
int cuLaunchKernel(uint64_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                   unsigned by, unsigned bz, unsigned sh, void* s, void** params, void** extra) {
  uint64_t v[11] = {f, gx, gy, gz, bx, by, bz, sh, (uint64_t)s, (uint64_t)params, (uint64_t)extra};
  for (int i = 0; i < 11; i++) got[i] = v[i];
  return 7;
}
int cublasSgemm_v2(void* h, int ta, int tb, int m, int n, int k, const float* alpha,
                   const float* a, int lda, const float* b, int ldb, const float* beta,
                   float* c, int ldc) {
  uint64_t v[11] = {(uint64_t)h, (uint64_t)ta, (uint64_t)tb, (uint64_t)m, (uint64_t)n, (uint64_t)k,
                    (uint64_t)lda, (uint64_t)ldb, (uint64_t)ldc, (uint64_t)(*alpha * 4), (uint64_t)(*beta * 4)};
  for (int i = 0; i < 11; i++) got[i] = v[i];
  return a == (const float*)0x1000 && b == (const float*)0x2000 && c == (float*)0x3000 ? 0 : 9;
}
int cuCtxSetCurrent(void* c) { got[0] = (uint64_t)c; return 3; }
int cuMemcpyDtoDAsync_v2(uint64_t d, uint64_t s, size_t n, void* st) {
  got[0] = d; got[1] = s; got[2] = n; got[3] = (uint64_t)st;
  return 5;
}
`

func TestRawCallABI(t *testing.T) {
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skipf("no gcc: %v", err)
	}
	dir := t.TempDir()
	src, so := filepath.Join(dir, "fake.c"), filepath.Join(dir, "libfake.so")
	if err := os.WriteFile(src, []byte(fakeC), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-O1", "-shared", "-fPIC", "-o", so, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	l, err := open("fake", Options{Path: so, Exclusive: true}, []string{"libfake.so"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	var gotFn func() *uint64
	if err := l.bind([]dynlib.Func{{Ptr: &gotFn, Name: "fake_got"}}); err != nil {
		t.Fatal(err)
	}
	got := unsafe.Slice(gotFn(), 11)
	c := &CUDA{}
	c.rawLaunch, _ = dlsymAddr(l, "cuLaunchKernel")
	c.rawSetCurrent, _ = dlsymAddr(l, "cuCtxSetCurrent")
	c.rawDtoD, _ = dlsymAddr(l, "cuMemcpyDtoDAsync_v2")

	var par [2]unsafe.Pointer
	pp := uint64(uintptr(unsafe.Pointer(&par[0])))
	if r := c.Launch(0xabcdef12345, 70000, 1, 2, 256, 3, 4, 96, 0x5151, &par[0]); r != 7 {
		t.Fatalf("Launch returned %d", r)
	}
	want := []uint64{0xabcdef12345, 70000, 1, 2, 256, 3, 4, 96, 0x5151, pp, 0}
	if !slices.Equal(got, want) {
		t.Fatalf("cuLaunchKernel saw %#x, want %#x", got, want)
	}
	bl := &CUBLAS{}
	bl.rawSgemm, _ = dlsymAddr(l, "cublasSgemm_v2")
	al, be := float32(1.5), float32(0.25)
	if r := bl.Sgemm32(0xfeed, OpT, OpN, 3, 4, 5, &al, 0x1000, 6, 0x2000, 7, &be, 0x3000, 8); r != 0 ||
		!slices.Equal(got, []uint64{0xfeed, OpT, OpN, 3, 4, 5, 6, 7, 8, 6, 1}) {
		t.Fatalf("Sgemm32: %d, %v", r, got)
	}
	if r := c.SetCurrent(0x1234_5678_9abc); r != 3 || got[0] != 0x1234_5678_9abc {
		t.Fatalf("SetCurrent: %d, %#x", r, got[0])
	}
	if r := c.CopyDtoD(0x7000_0000_1000, 0x7000_0000_2000, 1<<33, 0x99); r != 5 ||
		!slices.Equal(got[:4], []uint64{0x7000_0000_1000, 0x7000_0000_2000, 1 << 33, 0x99}) {
		t.Fatalf("CopyDtoD: %d, %#x", r, got[:4])
	}
}
