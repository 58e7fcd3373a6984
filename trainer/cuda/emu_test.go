//go:build linux && (amd64 || arm64)

package cuda

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/loaderd/loaderd/trainer/cuda/driver"
	"github.com/loaderd/loaderd/trainer/cuda/kernels"
	"github.com/loaderd/loaderd/trainer/tensor"
)

// The emulator compiles the embedded CUDA sources as C++ for the host (a
// launch runs blockDim host threads that walk the blocks in order, with
// __syncthreads as a barrier) and stands in for libcuda with host memory,
// so the Device's Go code, the kernels' index arithmetic and the block
// reductions run against the CPU engine on machines without a GPU. It
// cannot see data races, warp-level behaviour, memory-model effects or
// anything the real driver and compiler do.

const emuShim = `
#include <cmath>
#include <cstring>
#include <algorithm>
#include <barrier>
#include <thread>
#include <vector>
#include <mutex>
using std::min; using std::max;
struct dim3 { unsigned x, y, z; };
static thread_local dim3 threadIdx = {0, 0, 0}, blockIdx = {0, 0, 0};
static dim3 blockDim = {1, 1, 1}, gridDim = {1, 1, 1};
static std::barrier<>* emu_bar;
#define __global__
#define __device__
#define __shared__ static
#define __syncthreads() emu_bar->arrive_and_wait()
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline int __float_as_int(float f) { int u; memcpy(&u, &f, 4); return u; }
static std::mutex emu_atomic;
static inline int atomicOr(int* p, int v) { std::lock_guard<std::mutex> g(emu_atomic); int o = *p; *p |= v; return o; }

// emu_launch runs a grid the way a GPU may: bx threads that each walk the
// blocks in order, meeting at a barrier between blocks (so __shared__
// memory, static here, belongs to one block at a time).
extern "C" void emu_launch(void (*f)(void**), unsigned gx, unsigned bx, void** params) {
  std::barrier<> bar(bx);
  emu_bar = &bar;
  gridDim.x = gx;
  blockDim.x = bx;
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < bx; t++)
    ts.emplace_back([=, &bar] {
      threadIdx.x = t;
      for (unsigned b = 0; b < gx; b++) {
        blockIdx.x = b;
        f(params);
        bar.arrive_and_wait();
      }
    });
  for (auto& t : ts) t.join();
}
`

// emuThreads is the block size emulated launches run with.
const emuThreads = 8

var kernelSig = regexp.MustCompile(`__global__\s+void\s+(\w+)\s*\(([^)]*)\)`)

// emuLib is one build of the host library: emuLibs[0] as the kernels
// are, emuLibs[1] with -DLOADERD_INDEX64, whose fits32 is always false,
// so the 64-bit index paths that only huge launches take run at test sizes.
type emuLib struct {
	once   sync.Once
	handle uintptr
	err    error
	skip   string
}

var emuLibs [2]emuLib

// emuLibrary builds the host library once per test binary.
func emuLibrary(t *testing.T) uintptr { return emuLibraryOf(t, false) }

func emuLibraryOf(t *testing.T, index64 bool) uintptr {
	t.Helper()
	l := &emuLibs[0]
	var defs []string
	if index64 {
		l, defs = &emuLibs[1], []string{"-DLOADERD_INDEX64"}
	}
	l.once.Do(func() { l.handle, l.skip, l.err = buildEmu(defs...) })
	if l.skip != "" {
		t.Skip(l.skip)
	}
	if l.err != nil {
		t.Fatal(l.err)
	}
	return l.handle
}

// buildEmu compiles the host library with one launch_<name>(void** params)
// per kernel, unpacking params the way cuLaunchKernel would; defines are
// extra -D flags.
func buildEmu(defines ...string) (uintptr, string, error) {
	cxx, err := exec.LookPath("g++")
	if err != nil {
		return 0, fmt.Sprintf("no g++ to build the kernel emulator: %v", err), nil
	}
	var b strings.Builder
	b.WriteString(emuShim)
	var wrappers strings.Builder
	for _, s := range kernels.Sources() {
		// Each carries the (guarded) prelude; reduce.cu defines REDUCE_THREADS.
		fmt.Fprintf(&b, "\n#undef REDUCE_THREADS\n// ---- %s\n%s\n", s.File, s.Code)
		for _, m := range kernelSig.FindAllStringSubmatch(s.Code, -1) {
			var args []string
			for i, p := range strings.Split(m[2], ",") {
				p = strings.TrimSpace(p)
				typ := strings.TrimSpace(p[:strings.LastIndexAny(p, " *")+1])
				args = append(args, fmt.Sprintf("*(%s*)p[%d]", typ, i))
			}
			fmt.Fprintf(&wrappers, "extern \"C\" void launch_%s(void** p) { %s(%s); }\n", m[1], m[1], strings.Join(args, ", "))
		}
	}
	b.WriteString(wrappers.String())
	dir, err := os.MkdirTemp("", "cuda-emu-")
	if err != nil {
		return 0, "", err
	}
	defer os.RemoveAll(dir) // the loaded library stays mapped
	src, lib := filepath.Join(dir, "emu.cpp"), filepath.Join(dir, "emu.so")
	if err := os.WriteFile(src, []byte(b.String()), 0o644); err != nil {
		return 0, "", err
	}
	args := append([]string{"-std=c++20", "-pthread", "-O1", "-ffp-contract=off", "-shared", "-fPIC"}, defines...)
	out, err := exec.Command(cxx, append(args, "-o", lib, src)...).CombinedOutput()
	if err != nil {
		return 0, "", fmt.Errorf("g++: %v\n%s", err, out)
	}
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_LOCAL)
	return h, "", err
}

// emuMem is the emulated device memory: Go-allocated blocks (the Go heap
// does not move), addressed by their real host addresses.
type emuMem struct {
	blocks map[uintptr][]uint64
}

// bytes returns the memory from p to the end of its block.
func (m *emuMem) bytes(p driver.DevicePtr) []byte {
	for base, blk := range m.blocks {
		n := uintptr(len(blk) * 8)
		if uintptr(p) >= base && uintptr(p) < base+n {
			all := unsafe.Slice((*byte)(unsafe.Pointer(&blk[0])), n)
			return all[uintptr(p)-base:]
		}
	}
	return nil
}

type fakePTX struct{}

func (fakePTX) Compile(src, name string, _ []string) ([]byte, string, error) {
	var b strings.Builder
	for _, m := range kernelSig.FindAllStringSubmatch(src, -1) {
		fmt.Fprintf(&b, ".visible .entry %s(\n", m[1])
	}
	b.WriteByte(0)
	return []byte(b.String()), "", nil
}

// emuDriver returns driver bindings backed by host memory and lib.
func emuDriver(t *testing.T, lib uintptr) (*driver.CUDA, *emuMem) {
	m := &emuMem{blocks: map[uintptr][]uint64{}}
	launch, err := purego.Dlsym(lib, "emu_launch")
	if err != nil {
		t.Fatal(err)
	}
	const ok = driver.Success
	bad := driver.Result(1) // CUDA_ERROR_INVALID_VALUE
	copyTo := func(dst []byte, src []byte, n uint64) driver.Result {
		if dst == nil || src == nil || uint64(len(dst)) < n || uint64(len(src)) < n {
			t.Errorf("emulated copy of %d bytes out of bounds", n)
			return bad
		}
		copy(dst[:n], src[:n])
		return ok
	}
	return &driver.CUDA{
		Init:             func(uint32) driver.Result { return ok },
		DriverGetVersion: func(v *int32) driver.Result { *v = 12000; return ok },
		DeviceGetCount:   func(n *int32) driver.Result { *n = 1; return ok },
		DeviceGet:        func(d *int32, o int32) driver.Result { *d = o; return ok },
		DeviceGetName:    func(*byte, int32, int32) driver.Result { return ok },
		DeviceTotalMem:   func(b *uint64, _ int32) driver.Result { *b = 1 << 30; return ok },
		DeviceGetAttribute: func(v *int32, a, _ int32) driver.Result {
			*v = map[int32]int32{driver.AttrComputeCapabilityMajor: 8}[a]
			return ok
		},
		DevicePrimaryCtxRetain:  func(c *driver.Context, _ int32) driver.Result { *c = 1; return ok },
		DevicePrimaryCtxRelease: func(int32) driver.Result { return ok },
		CtxSetCurrent:           func(driver.Context) driver.Result { return ok },
		MemAlloc: func(p *driver.DevicePtr, n uint64) driver.Result {
			blk := make([]uint64, (n+7)/8)
			base := uintptr(unsafe.Pointer(&blk[0]))
			m.blocks[base] = blk
			*p = driver.DevicePtr(base)
			return ok
		},
		MemFree: func(p driver.DevicePtr) driver.Result {
			if _, found := m.blocks[uintptr(p)]; !found {
				t.Errorf("emulated free of unknown %#x", p)
				return bad
			}
			delete(m.blocks, uintptr(p))
			return ok
		},
		MemsetD32Async: func(p driver.DevicePtr, v uint32, n uint64, _ driver.Stream) driver.Result {
			b := m.bytes(p)
			if uint64(len(b)) < 4*n {
				t.Errorf("emulated memset out of bounds")
				return bad
			}
			w := unsafe.Slice((*uint32)(unsafe.Pointer(&b[0])), n)
			for i := range w {
				w[i] = v
			}
			return ok
		},
		MemcpyHtoDAsync: func(dst driver.DevicePtr, src unsafe.Pointer, n uint64, _ driver.Stream) driver.Result {
			return copyTo(m.bytes(dst), unsafe.Slice((*byte)(src), n), n)
		},
		MemcpyDtoHAsync: func(dst unsafe.Pointer, src driver.DevicePtr, n uint64, _ driver.Stream) driver.Result {
			return copyTo(unsafe.Slice((*byte)(dst), n), m.bytes(src), n)
		},
		MemcpyDtoDAsync: func(dst, src driver.DevicePtr, n uint64, _ driver.Stream) driver.Result {
			return copyTo(m.bytes(dst), m.bytes(src), n)
		},
		MemHostRegister:   func(unsafe.Pointer, uint64, uint32) driver.Result { return ok },
		MemHostUnregister: func(unsafe.Pointer) driver.Result { return ok },
		StreamCreate:      func(s *driver.Stream, _ uint32) driver.Result { *s = 1; return ok },
		StreamSynchronize: func(driver.Stream) driver.Result { return ok },
		StreamDestroy:     func(driver.Stream) driver.Result { return ok },
		ModuleLoadData:    func(md *driver.Module, _ unsafe.Pointer) driver.Result { *md = 1; return ok },
		ModuleUnload:      func(driver.Module) driver.Result { return ok },
		ModuleGetFunction: func(f *driver.Function, _ driver.Module, name string) driver.Result {
			p, err := purego.Dlsym(lib, "launch_"+name)
			if err != nil {
				return bad
			}
			*f = driver.Function(p)
			return ok
		},
		LaunchKernel: func(f driver.Function, gx, gy, gz, bx, by, bz, sh uint32, _ driver.Stream, params *unsafe.Pointer, _ *unsafe.Pointer) driver.Result {
			if gx == 0 || bx == 0 || gx > 1<<31-1 || bx > 1024 || gy*gz*by*bz != 1 || sh != 0 {
				t.Errorf("launch with grid %d×%d×%d block %d×%d×%d", gx, gy, gz, bx, by, bz)
				return bad
			}
			// Fewer threads than the real 256 keep the test fast; the
			// kernels are written for any power-of-two block size.
			purego.SyscallN(launch, uintptr(f), uintptr(gx), uintptr(min(bx, emuThreads)), uintptr(unsafe.Pointer(params)))
			return ok
		},
		GetErrorString: func(driver.Result, **byte) driver.Result { return bad },
	}, m
}

// f32s views n floats of emulated memory at p.
func (m *emuMem) f32s(p driver.DevicePtr, n int) []float32 {
	b := m.bytes(p)
	if len(b) < 4*n || n == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), n)
}

// emuBLAS is cublasSgemm_v2 written from cuBLAS's column-major definition,
// independent of the row-major operand swap in Device.Gemm that it checks.
func emuBLAS(t *testing.T, m *emuMem) *driver.CUBLAS {
	return &driver.CUBLAS{
		Destroy: func(uintptr) int32 { return 0 },
		Sgemm: func(_ uintptr, ta, tb int32, M, N, K int32, alpha *float32, a driver.DevicePtr, lda int32,
			b driver.DevicePtr, ldb int32, beta *float32, c driver.DevicePtr, ldc int32) int32 {
			// Column-major: X[i, j] = x[i + j·ld]; op(A) is M×K, op(B) K×N.
			rowsA, colsA, rowsB, colsB := M, K, K, N // stored shapes
			if ta == driver.OpT {
				rowsA, colsA = K, M
			}
			if tb == driver.OpT {
				rowsB, colsB = N, K
			}
			av := m.f32s(a, int(lda*(colsA-1)+rowsA))
			bv := m.f32s(b, int(ldb*(colsB-1)+rowsB))
			cv := m.f32s(c, int(ldc*(N-1)+M))
			if av == nil || bv == nil || cv == nil {
				t.Errorf("emulated sgemm: operand out of bounds")
				return 7 // CUBLAS_STATUS_INVALID_VALUE
			}
			opA := func(i, p int32) float32 {
				if ta == driver.OpT {
					return av[p+i*lda]
				}
				return av[i+p*lda]
			}
			opB := func(p, j int32) float32 {
				if tb == driver.OpT {
					return bv[j+p*ldb]
				}
				return bv[p+j*ldb]
			}
			for j := int32(0); j < N; j++ {
				for i := int32(0); i < M; i++ {
					var s float32
					for p := int32(0); p < K; p++ {
						s += opA(i, p) * opB(p, j)
					}
					if *beta == 0 {
						cv[i+j*ldc] = *alpha * s
					} else {
						cv[i+j*ldc] = *alpha*s + *beta*cv[i+j*ldc]
					}
				}
			}
			return 0
		},
	}
}

// openEmu opens an emulated device; with blas, Gemm goes through the
// emulated cuBLAS instead of the gemm_f32 kernel.
func openEmu(t *testing.T, blas bool) *Device { return openEmuOf(t, blas, false) }

func openEmuOf(t *testing.T, blas, index64 bool) *Device {
	lib := emuLibraryOf(t, index64)
	cu, m := emuDriver(t, lib)
	d, err := newDevice(cu, Config{NoCache: true, NoCUBLAS: true, NoCUDNN: true, compiler: fakePTX{}})
	if err != nil {
		t.Fatal(err)
	}
	if blas {
		d.blas, d.blasH = emuBLAS(t, m), 1
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// The Device and every kernel, run on the host emulator, match the CPU.
func TestEmulatedMatchesCPU(t *testing.T) {
	compareWithCPU(t, openEmu(t, false))
}

// The 64-bit index paths (im2col, col2im, transpose12 beyond 2³² elements)
// compute what the 32-bit ones do.
func TestEmulatedMatchesCPUIndex64(t *testing.T) {
	compareWithCPU(t, openEmuOf(t, false, true))
}

// Device.Gemm's row-major → column-major cuBLAS call is right.
func TestEmulatedCUBLASGemm(t *testing.T) {
	compareWithCPU(t, openEmu(t, true))
}

func TestEmulatedBadLabel(t *testing.T) { badLabel(t, openEmu(t, false)) }

func TestEmulatedLifecycle(t *testing.T) { lifecycle(t, openEmu(t, false)) }

// RegisterHostReadOnly asks the driver for a portable, read-only
// registration of exactly the memory given, and UnregisterHost undoes it.
func TestEmulatedRegisterHostReadOnly(t *testing.T) {
	d := openEmu(t, false)
	var gotFlags uint32
	var gotPtr, unreg unsafe.Pointer
	var gotLen uint64
	d.cu.MemHostRegister = func(p unsafe.Pointer, n uint64, flags uint32) driver.Result {
		gotPtr, gotLen, gotFlags = p, n, flags
		return driver.Success
	}
	d.cu.MemHostUnregister = func(p unsafe.Pointer) driver.Result { unreg = p; return driver.Success }
	mem := make([]byte, 3<<12)
	if err := d.RegisterHostReadOnly(mem); err != nil {
		t.Fatal(err)
	}
	want := uint32(driver.MemHostRegisterPortable | driver.MemHostRegisterReadOnly)
	if gotPtr != unsafe.Pointer(&mem[0]) || gotLen != uint64(len(mem)) || gotFlags != want {
		t.Fatalf("cuMemHostRegister(%p, %d, %#x), want (%p, %d, %#x)", gotPtr, gotLen, gotFlags, &mem[0], len(mem), want)
	}
	if err := d.UnregisterHost(mem); err != nil || unreg != unsafe.Pointer(&mem[0]) {
		t.Fatalf("UnregisterHost: %v, unregistered %p", err, unreg)
	}
	d.cu.MemHostRegister = func(unsafe.Pointer, uint64, uint32) driver.Result { return driver.Result(801) } // NOT_SUPPORTED
	if err := d.RegisterHostReadOnly(mem); err == nil {
		t.Fatal("a refused registration returned no error")
	}
}

// fakeCUBIN compiles like fakePTX and also to an ELF-looking CUBIN.
type fakeCUBIN struct {
	fakePTX
	calls int
}

func (f *fakeCUBIN) CompileCUBIN(_, name string, opts []string) ([]byte, string, error) {
	f.calls++
	return []byte(fmt.Sprintf("\x7fELF %s %v", name, opts)), "", nil
}

// A driver whose JIT refuses the PTX (a newer NVRTC's PTX ISA) gets each
// source as a CUBIN for the GPU's architecture, and the kernels still
// match the CPU; a refusal for another reason, or no way to make a CUBIN,
// is an error naming both.
func TestEmulatedCUBINWhenPTXRefused(t *testing.T) {
	tests := []struct {
		name    string
		refuse  driver.Result // what cuModuleLoadData answers for PTX
		comp    kernels.Compiler
		want    string // in Code(), or in the error when wantErr
		wantErr bool
	}{
		{"newer PTX ISA", driver.ErrorUnsupportedPTXVersion, &fakeCUBIN{}, "CUBIN sm_80 (the driver refused the PTX: CUresult 222)", false},
		{"no JIT", driver.ErrorJITCompilerNotFound, &fakeCUBIN{}, "CUBIN sm_80", false},
		{"NVRTC without CUBIN", driver.ErrorUnsupportedPTXVersion, fakePTX{}, "no CUBIN to load instead", true},
		{"other refusal", driver.Result(200), &fakeCUBIN{}, "cuModuleLoadData", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cu, _ := emuDriver(t, emuLibrary(t))
			var loads []string
			cu.ModuleLoadData = func(m *driver.Module, p unsafe.Pointer) driver.Result {
				head := string(unsafe.Slice((*byte)(p), 4))
				loads = append(loads, head)
				if head != "\x7fELF" {
					return tc.refuse
				}
				*m = 1
				return driver.Success
			}
			d, err := newDevice(cu, Config{NoCache: true, NoCUBLAS: true, NoCUDNN: true, compiler: tc.comp})
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					d.Close()
					t.Fatalf("err = %v, want one containing %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if !strings.HasPrefix(d.Code(), tc.want) {
				t.Fatalf("Code() = %q, want prefix %q", d.Code(), tc.want)
			}
			if n := len(kernels.Sources()); tc.comp.(*fakeCUBIN).calls != n || len(loads) != 2*n {
				t.Fatalf("%d CUBIN compiles, %d loads for %d sources", tc.comp.(*fakeCUBIN).calls, len(loads), n)
			}
			compareWithCPU(t, d)
		})
	}
}

// The channel reductions split over several blocks a channel (as a large
// batch is on a GPU with many multiprocessors) add their partial sums to
// what the CPU computes: here every reduction with more than one outer
// index splits.
func TestEmulatedSplitReductionsMatchCPU(t *testing.T) {
	d := openEmu(t, true)
	d.sms, d.reduceMin = 16, 1
	if s := d.reduceSplits(5, 3, 7); s != 5 {
		t.Fatalf("reduceSplits(5, 3, 7) = %d, want 5 (one per outer index)", s)
	}
	compareWithCPU(t, d)
	trainMatchesCPU(t, func(int) []tensor.Device { return []tensor.Device{d} }, 1, 1e-4)
}

func TestReduceSplits(t *testing.T) {
	d := &Device{sms: 132, reduceMin: reduceMinPerBlock}
	for _, tc := range []struct{ outer, c, inner, want int }{
		{512, 64, 1024, 9},   // ResNet's first stage: 64 channels fill 132 SMs 4× over
		{512, 512, 16, 1},    // its last: 512 blocks already, 8k elements a channel
		{512, 128, 256, 5},   // second stage
		{4, 64, 65536, 4},    // no more splits than outer indices
		{4, 3, 10, 1},        // too small to split
		{100000, 1, 1, 6},    // 100k elements, at least 16k a block
		{100000, 1, 100, 64}, // capped
	} {
		if got := d.reduceSplits(tc.outer, tc.c, tc.inner); got != tc.want {
			t.Errorf("reduceSplits(%d, %d, %d) = %d, want %d", tc.outer, tc.c, tc.inner, got, tc.want)
		}
	}
	if got := (&Device{reduceMin: 1}).reduceSplits(512, 64, 1024); got != 1 {
		t.Errorf("without a multiprocessor count: %d splits, want 1", got)
	}
}
