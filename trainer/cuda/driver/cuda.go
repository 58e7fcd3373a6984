package driver

import (
	"fmt"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/loaderd/loaderd/trainer/internal/dynlib"
)

// Handles of the CUDA driver API, as opaque pointers.
type (
	Context   uintptr
	Stream    uintptr
	Module    uintptr
	Function  uintptr
	DevicePtr uintptr // CUdeviceptr (64-bit platforms only)
)

// Result is a CUresult; 0 is CUDA_SUCCESS.
type Result int32

// Result codes callers test for.
const (
	Success           Result = 0
	ErrorOutOfMemory  Result = 2
	ErrorNoDevice     Result = 100
	ErrorInvalidPTX   Result = 218
	ErrorNotSupported Result = 801

	// The driver cannot JIT-compile the PTX: no JIT, a PTX ISA newer than
	// the driver (NVRTC newer than the driver), or JIT turned off.
	ErrorJITCompilerNotFound    Result = 221
	ErrorUnsupportedPTXVersion  Result = 222
	ErrorJITCompilationDisabled Result = 223
)

// Device attributes used here (CUdevice_attribute).
const (
	AttrComputeCapabilityMajor = 75
	AttrComputeCapabilityMinor = 76
	AttrMultiprocessorCount    = 16
)

// Error is a failed driver call: the function and its CUresult.
type Error struct {
	Op   string
	Code Result
	Msg  string // from cuGetErrorString, when the driver gives one
}

func (e *Error) Error() string {
	if e.Msg != "" {
		return fmt.Sprintf("driver: %s: %s (CUresult %d)", e.Op, e.Msg, int32(e.Code))
	}
	return fmt.Sprintf("driver: %s: CUresult %d", e.Op, int32(e.Code))
}

// CUDA holds the bound functions of libcuda.so.1. Its function fields
// may be called directly; Check turns a Result into an *Error.
type CUDA struct {
	lib *lib
	// Raw addresses of the per-kernel calls: purego.SyscallN allocates
	// once per call where a RegisterFunc wrapper allocates per argument.
	rawLaunch, rawSetCurrent, rawDtoD uintptr

	Init                    func(flags uint32) Result
	DriverGetVersion        func(v *int32) Result
	DeviceGetCount          func(n *int32) Result
	DeviceGet               func(dev *int32, ordinal int32) Result
	DeviceGetName           func(name *byte, n int32, dev int32) Result
	DeviceTotalMem          func(bytes *uint64, dev int32) Result
	DeviceGetAttribute      func(v *int32, attr int32, dev int32) Result
	DevicePrimaryCtxRetain  func(ctx *Context, dev int32) Result
	DevicePrimaryCtxRelease func(dev int32) Result
	CtxSetCurrent           func(ctx Context) Result
	MemAlloc                func(p *DevicePtr, bytes uint64) Result
	MemFree                 func(p DevicePtr) Result
	MemGetInfo              func(free, total *uint64) Result
	MemsetD32Async          func(p DevicePtr, v uint32, n uint64, s Stream) Result
	MemcpyHtoDAsync         func(dst DevicePtr, src unsafe.Pointer, bytes uint64, s Stream) Result
	MemcpyDtoHAsync         func(dst unsafe.Pointer, src DevicePtr, bytes uint64, s Stream) Result
	MemcpyDtoDAsync         func(dst, src DevicePtr, bytes uint64, s Stream) Result
	MemHostRegister         func(p unsafe.Pointer, bytes uint64, flags uint32) Result
	MemHostUnregister       func(p unsafe.Pointer) Result
	StreamCreate            func(s *Stream, flags uint32) Result
	StreamSynchronize       func(s Stream) Result
	StreamDestroy           func(s Stream) Result
	ModuleLoadData          func(m *Module, image unsafe.Pointer) Result
	ModuleUnload            func(m Module) Result
	ModuleGetFunction       func(f *Function, m Module, name string) Result
	LaunchKernel            func(f Function, gx, gy, gz, bx, by, bz, shmem uint32, s Stream, params *unsafe.Pointer, extra *unsafe.Pointer) Result
	GetErrorString          func(r Result, s **byte) Result
}

// Flags.
const (
	StreamNonBlocking       = 0x1 // does not synchronise with the legacy default stream
	MemHostRegisterPortable = 0x1
	MemHostRegisterReadOnly = 0x8 // CUDA 11.1+: memory the process may only read
)

// CUDANames are the file names LoadCUDA tries.
var CUDANames = []string{"libcuda.so.1", "libcuda.so"}

// LoadCUDA opens the CUDA driver library and binds every function above,
// checking each symbol first. Without a driver it returns a *LibError
// wrapping ErrNotFound. It does not call cuInit.
func LoadCUDA(o Options) (*CUDA, error) {
	l, err := open("CUDA driver", o, CUDANames, nil)
	if err != nil {
		return nil, err
	}
	c := &CUDA{lib: l}
	err = l.bind([]dynlib.Func{
		{Ptr: &c.Init, Name: "cuInit"},
		{Ptr: &c.DriverGetVersion, Name: "cuDriverGetVersion"},
		{Ptr: &c.DeviceGetCount, Name: "cuDeviceGetCount"},
		{Ptr: &c.DeviceGet, Name: "cuDeviceGet"},
		{Ptr: &c.DeviceGetName, Name: "cuDeviceGetName"},
		{Ptr: &c.DeviceTotalMem, Name: "cuDeviceTotalMem_v2"},
		{Ptr: &c.DeviceGetAttribute, Name: "cuDeviceGetAttribute"},
		{Ptr: &c.DevicePrimaryCtxRetain, Name: "cuDevicePrimaryCtxRetain"},
		{Ptr: &c.DevicePrimaryCtxRelease, Name: "cuDevicePrimaryCtxRelease_v2"},
		{Ptr: &c.CtxSetCurrent, Name: "cuCtxSetCurrent"},
		{Ptr: &c.MemAlloc, Name: "cuMemAlloc_v2"},
		{Ptr: &c.MemFree, Name: "cuMemFree_v2"},
		{Ptr: &c.MemGetInfo, Name: "cuMemGetInfo_v2"},
		{Ptr: &c.MemsetD32Async, Name: "cuMemsetD32Async"},
		{Ptr: &c.MemcpyHtoDAsync, Name: "cuMemcpyHtoDAsync_v2"},
		{Ptr: &c.MemcpyDtoHAsync, Name: "cuMemcpyDtoHAsync_v2"},
		{Ptr: &c.MemcpyDtoDAsync, Name: "cuMemcpyDtoDAsync_v2"},
		{Ptr: &c.MemHostRegister, Name: "cuMemHostRegister_v2"},
		{Ptr: &c.MemHostUnregister, Name: "cuMemHostUnregister"},
		{Ptr: &c.StreamCreate, Name: "cuStreamCreate"},
		{Ptr: &c.StreamSynchronize, Name: "cuStreamSynchronize"},
		{Ptr: &c.StreamDestroy, Name: "cuStreamDestroy_v2"},
		{Ptr: &c.ModuleLoadData, Name: "cuModuleLoadData"},
		{Ptr: &c.ModuleUnload, Name: "cuModuleUnload"},
		{Ptr: &c.ModuleGetFunction, Name: "cuModuleGetFunction"},
		{Ptr: &c.LaunchKernel, Name: "cuLaunchKernel"},
		{Ptr: &c.GetErrorString, Name: "cuGetErrorString"},
	})
	if err != nil {
		l.close()
		return nil, err
	}
	c.rawLaunch, _ = purego.Dlsym(l.handle, "cuLaunchKernel") // checked by bind
	c.rawSetCurrent, _ = purego.Dlsym(l.handle, "cuCtxSetCurrent")
	c.rawDtoD, _ = purego.Dlsym(l.handle, "cuMemcpyDtoDAsync_v2")
	return c, nil
}

// Launch is LaunchKernel without extra arguments, on the cheap call path
// (falling back to the LaunchKernel field for bindings made by hand).
func (c *CUDA) Launch(f Function, gx, gy, gz, bx, by, bz, shmem uint32, s Stream, params *unsafe.Pointer) Result {
	if c.rawLaunch == 0 {
		return c.LaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, s, params, nil)
	}
	r, _, _ := purego.SyscallN(c.rawLaunch, uintptr(f), uintptr(gx), uintptr(gy), uintptr(gz),
		uintptr(bx), uintptr(by), uintptr(bz), uintptr(shmem), uintptr(s), uintptr(unsafe.Pointer(params)), 0)
	return Result(int32(r))
}

// SetCurrent is CtxSetCurrent on the cheap call path.
func (c *CUDA) SetCurrent(ctx Context) Result {
	if c.rawSetCurrent == 0 {
		return c.CtxSetCurrent(ctx)
	}
	r, _, _ := purego.SyscallN(c.rawSetCurrent, uintptr(ctx))
	return Result(int32(r))
}

// CopyDtoD is MemcpyDtoDAsync on the cheap call path.
func (c *CUDA) CopyDtoD(dst, src DevicePtr, bytes uint64, s Stream) Result {
	if c.rawDtoD == 0 {
		return c.MemcpyDtoDAsync(dst, src, bytes, s)
	}
	r, _, _ := purego.SyscallN(c.rawDtoD, uintptr(dst), uintptr(src), uintptr(bytes), uintptr(s))
	return Result(int32(r))
}

// Path returns the file the driver was loaded from.
func (c *CUDA) Path() string { return c.lib.path }

// Check returns nil for Success and an *Error naming op otherwise.
func (c *CUDA) Check(op string, r Result) error {
	if r == Success {
		return nil
	}
	e := &Error{Op: op, Code: r}
	var s *byte
	if c.GetErrorString != nil && c.GetErrorString(r, &s) == Success && s != nil {
		e.Msg = cString(s)
	}
	return e
}

// cString copies a NUL-terminated C string (at most 4 KiB), reading one
// byte at a time so that it never touches memory past the terminator.
func cString(p *byte) string {
	var b []byte
	for i := 0; i < 4096; i++ {
		c := *(*byte)(unsafe.Add(unsafe.Pointer(p), i))
		if c == 0 {
			break
		}
		b = append(b, c)
	}
	return string(b)
}
