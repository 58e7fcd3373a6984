package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/loaderd/loaderd/trainer/cuda/driver"
	"github.com/loaderd/loaderd/trainer/cuda/kernels"
	"github.com/loaderd/loaderd/trainer/tensor"
)

// ErrNoDriver is what New's error wraps when libcuda.so.1 cannot be found
// (the same sentinel as driver.ErrNotFound; errors.As finds the
// *driver.LibError with the paths searched).
var ErrNoDriver = driver.ErrNotFound

// ErrNoDevice reports a driver without the requested GPU.
var ErrNoDevice = errors.New("cuda: no such device")

// Config selects a GPU and where its libraries are.
type Config struct {
	Name    string         // device name for logs; default "cuda:<ordinal>"
	Ordinal int            // CUDA device ordinal
	Driver  driver.Options // libcuda.so.1
	NVRTC   driver.Options
	CUBLAS  driver.Options
	// Cache holds compiled PTX; nil uses kernels.DefaultCache(), and
	// NoCache compiles every time.
	Cache   *kernels.Cache
	NoCache bool
	// TF32 lets cuBLAS use TF32 tensor cores for f32 GEMM (faster, about
	// 1e-3 relative error instead of f32's 1e-6).
	TF32 bool
	// NoCUBLAS uses the reference GEMM kernel even when cuBLAS is present
	// (tests compare the two).
	NoCUBLAS bool
	// CUDNN is where libcudnn.so.9 is; NoCUDNN runs convolutions as
	// im2col and GEMM even when cuDNN is present (tests compare the two).
	CUDNN   driver.Options
	NoCUDNN bool
	// CUDNNHeuristic takes cuDNN's heuristic choice of algorithm instead
	// of timing each candidate on a layer's first pass.
	CUDNNHeuristic bool

	compiler kernels.Compiler // tests: replaces NVRTC
}

// Device is a tensor.Device on one NVIDIA GPU: one CUDA stream, kernels
// from the embedded sources, GEMM through cuBLAS (or a reference kernel
// when cuBLAS is absent).
type Device struct {
	name   string
	cu     *driver.CUDA
	dev    int32
	cc     [2]int
	mem    uint64
	ctx    driver.Context
	stream driver.Stream
	mods   []driver.Module
	code   string // how the kernels were loaded: "PTX" or "CUBIN sm_XY (…)"
	fn     [kCount]driver.Function
	blas   *driver.CUBLAS
	blasH  uintptr
	dnn    *dnn
	dnnWhy string // why dnn is nil

	status   driver.DevicePtr // kernels set bit 0 on a bad label
	statusOp string           // the first op since Sync that may set it
	hostStat int32

	err    error
	dead   bool
	allocs map[*alloc]struct{}
	keep   [][]float32 // host slices that async copies may still read
	keepI  [][]int32

	// Kernel arguments: values in slot, pointers to them in par, both in
	// the Device so that a launch allocates nothing for them.
	slot [maxArgs]uint64
	par  [maxArgs]unsafe.Pointer
	na   int

	prof    map[string]*OpTime // SetProfile; nil when off
	scratch int                // ScratchFloats; tests shrink it to force many chunks

	// Split channel reductions (ops_reduce.go): the GPU's multiprocessors,
	// the fewest elements a block reduces (tests lower it to split small
	// tensors), and the partial sums, grown as needed.
	sms       int
	reduceMin int
	part      driver.DevicePtr
	partLen   int // doubles
}

var (
	_ tensor.Device       = (*Device)(nil)
	_ tensor.ScratchSizer = (*Device)(nil)
	_ tensor.Convolver    = (*Device)(nil)
)

// New opens GPU cfg.Ordinal: it loads the driver, retains the primary
// context, creates a stream, compiles (or loads cached) kernels for the
// GPU's architecture and loads cuBLAS. Without a driver the error wraps
// ErrNoDriver; it never panics.
func New(cfg Config) (*Device, error) {
	cu, err := driver.LoadCUDA(cfg.Driver)
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	return newDevice(cu, cfg)
}

// Count returns how many GPUs the CUDA driver sees (CUDA_VISIBLE_DEVICES
// applied). Without a driver the error wraps ErrNoDriver; a driver
// without GPUs gives 0 and no error.
func Count() (int, error) {
	cu, err := driver.LoadCUDA(driver.Options{})
	if err != nil {
		return 0, fmt.Errorf("cuda: %w", err)
	}
	return count(cu)
}

func count(cu *driver.CUDA) (int, error) {
	if err := cu.Check("cuInit", cu.Init(0)); err != nil {
		var de *driver.Error
		if errors.As(err, &de) && de.Code == driver.ErrorNoDevice {
			return 0, nil
		}
		return 0, fmt.Errorf("cuda: %w", err)
	}
	var n int32
	if err := cu.Check("cuDeviceGetCount", cu.DeviceGetCount(&n)); err != nil {
		return 0, fmt.Errorf("cuda: %w", err)
	}
	return int(n), nil
}

// newDevice opens a device through the bound driver cu (tests pass an
// emulated one).
func newDevice(cu *driver.CUDA, cfg Config) (*Device, error) {
	if err := cu.Check("cuInit", cu.Init(0)); err != nil {
		var de *driver.Error
		if errors.As(err, &de) && de.Code == driver.ErrorNoDevice {
			return nil, fmt.Errorf("%w: %w", ErrNoDevice, err)
		}
		return nil, fmt.Errorf("cuda: %w", err)
	}
	var count int32
	if err := cu.Check("cuDeviceGetCount", cu.DeviceGetCount(&count)); err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	if cfg.Ordinal < 0 || cfg.Ordinal >= int(count) {
		return nil, fmt.Errorf("%w: ordinal %d, %d devices", ErrNoDevice, cfg.Ordinal, count)
	}
	d := &Device{cu: cu, allocs: make(map[*alloc]struct{}), scratch: scratchFloats, reduceMin: reduceMinPerBlock}
	d.name = cfg.Name
	if d.name == "" {
		d.name = fmt.Sprintf("cuda:%d", cfg.Ordinal)
	}
	if err := d.open(cfg); err != nil {
		d.release()
		return nil, err
	}
	return d, nil
}

func (d *Device) open(cfg Config) error {
	cu := d.cu
	if err := cu.Check("cuDeviceGet", cu.DeviceGet(&d.dev, int32(cfg.Ordinal))); err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	var ma, mi int32
	if err := cu.Check("cuDeviceGetAttribute", cu.DeviceGetAttribute(&ma, driver.AttrComputeCapabilityMajor, d.dev)); err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	if err := cu.Check("cuDeviceGetAttribute", cu.DeviceGetAttribute(&mi, driver.AttrComputeCapabilityMinor, d.dev)); err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	d.cc = [2]int{int(ma), int(mi)}
	var sms int32
	if cu.DeviceGetAttribute(&sms, driver.AttrMultiprocessorCount, d.dev) == driver.Success {
		d.sms = int(sms) // only sizes the split reductions: 0 keeps them whole
	}
	if err := cu.Check("cuDeviceTotalMem", cu.DeviceTotalMem(&d.mem, d.dev)); err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cu.Check("cuDevicePrimaryCtxRetain", cu.DevicePrimaryCtxRetain(&d.ctx, d.dev)); err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	if err := cu.Check("cuCtxSetCurrent", cu.CtxSetCurrent(d.ctx)); err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	if err := cu.Check("cuStreamCreate", cu.StreamCreate(&d.stream, driver.StreamNonBlocking)); err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	if err := d.loadKernels(cfg); err != nil {
		return err
	}
	if err := cu.Check("cuMemAlloc", cu.MemAlloc(&d.status, 4)); err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	if err := cu.Check("cuMemsetD32Async", cu.MemsetD32Async(d.status, 0, 1, d.stream)); err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	d.loadCUBLAS(cfg)
	d.loadCUDNN(cfg)
	return cu.Check("cuStreamSynchronize", cu.StreamSynchronize(d.stream))
}

// loadKernels compiles or fetches the PTX and resolves every kernel.
func (d *Device) loadKernels(cfg Config) error {
	nv, nvErr := driver.LoadNVRTC(cfg.NVRTC)
	var comp kernels.Compiler
	switch {
	case cfg.compiler != nil:
		comp, nvErr = cfg.compiler, nil
	case nvErr == nil:
		comp = nv
	}
	cache := cfg.Cache
	if cache == nil && !cfg.NoCache {
		cache, _ = kernels.DefaultCache() // no cache dir: compile every time
	}
	ptx, err := kernels.Build(comp, kernels.Arch(d.cc[0], d.cc[1]), cache)
	if err != nil {
		if nvErr != nil {
			return fmt.Errorf("cuda: %w (and %w)", err, nvErr)
		}
		return fmt.Errorf("cuda: %w", err)
	}
	where := map[string]driver.Module{}
	d.code = "PTX"
	for _, s := range kernels.Sources() {
		m, err := d.loadModule(comp, s, ptx[s.File], cache)
		if err != nil {
			return err
		}
		d.mods = append(d.mods, m)
		for _, e := range s.Entries {
			where[e] = m
		}
	}
	for k, name := range kernelNames {
		m, ok := where[name]
		if !ok {
			return fmt.Errorf("cuda: kernel %s in no embedded source", name)
		}
		if err := d.cu.Check("cuModuleGetFunction "+name, d.cu.ModuleGetFunction(&d.fn[k], m, name)); err != nil {
			return fmt.Errorf("cuda: %w", err)
		}
	}
	return nil
}

// loadModule loads one source's PTX. Where the driver cannot JIT it (most
// often a PTX ISA newer than the driver, from a newer NVRTC, a case that
// CUDA's minor-version compatibility covers for machine code but not for
// PTX) it compiles the source to a CUBIN for the GPU's own architecture
// and loads that instead.
func (d *Device) loadModule(comp kernels.Compiler, s kernels.Source, ptx []byte, cache *kernels.Cache) (driver.Module, error) {
	var m driver.Module
	err := d.cu.Check("cuModuleLoadData "+s.File, d.cu.ModuleLoadData(&m, unsafe.Pointer(&ptx[0])))
	var de *driver.Error
	if err == nil || !errors.As(err, &de) || !jitRefused(de.Code) {
		if err != nil {
			return 0, fmt.Errorf("cuda: %w", err)
		}
		return m, nil
	}
	bc, _ := comp.(kernels.BinaryCompiler)
	sm := kernels.SM(d.cc[0], d.cc[1])
	bin, berr := kernels.BuildCUBIN(bc, s, sm, cache)
	if berr != nil {
		return 0, fmt.Errorf("cuda: %w; no CUBIN to load instead: %w", err, berr)
	}
	if err := d.cu.Check("cuModuleLoadData "+s.File+" (CUBIN "+sm+")", d.cu.ModuleLoadData(&m, unsafe.Pointer(&bin[0]))); err != nil {
		return 0, fmt.Errorf("cuda: %w", err)
	}
	d.code = fmt.Sprintf("CUBIN %s (the driver refused the PTX: %s)", sm, de.Msg)
	if de.Msg == "" {
		d.code = fmt.Sprintf("CUBIN %s (the driver refused the PTX: CUresult %d)", sm, int32(de.Code))
	}
	return m, nil
}

func jitRefused(r driver.Result) bool {
	switch r {
	case driver.ErrorInvalidPTX, driver.ErrorJITCompilerNotFound,
		driver.ErrorUnsupportedPTXVersion, driver.ErrorJITCompilationDisabled:
		return true
	}
	return false
}

// loadCUBLAS binds cuBLAS to the stream; without it Gemm uses gemm_f32.
func (d *Device) loadCUBLAS(cfg Config) {
	if cfg.NoCUBLAS {
		return
	}
	b, err := driver.LoadCUBLAS(cfg.CUBLAS)
	if err != nil {
		return
	}
	var h uintptr
	if b.Create(&h) != 0 {
		return
	}
	if b.SetStream(h, d.stream) != 0 {
		b.Destroy(h)
		return
	}
	mode := int32(driver.DefaultMath)
	if cfg.TF32 {
		mode = driver.TF32TensorOpMath
	}
	b.SetMath(h, mode)
	d.blas, d.blasH = b, h
}

// Name returns the device name.
func (d *Device) Name() string { return d.name }

func (d *Device) String() string {
	return fmt.Sprintf("cuda:%s(sm_%d%d, %d MiB)", d.name, d.cc[0], d.cc[1], d.mem>>20)
}

// ComputeCapability returns the GPU's major and minor version.
func (d *Device) ComputeCapability() (int, int) { return d.cc[0], d.cc[1] }

// TotalMem returns the GPU's memory in bytes.
func (d *Device) TotalMem() uint64 { return d.mem }

// Code says how the kernels were loaded: "PTX" (compiled by the driver's
// JIT) or "CUBIN sm_XY (…)" with the reason the PTX was refused.
func (d *Device) Code() string { return d.code }

// scratchFloats is a layer's scratch per chunk on a GPU (256 MiB of f32):
// about a hundred 32×32 images of a 64-channel conv's im2col at once. The
// host's cache-sized chunks (2 MiB) made a CIFAR step of batch 512 some
// 4,500 im2col launches and 1,000 GEMMs of one image each, 150 ms on an
// H100 (docs/GPU.md's profile).
const scratchFloats = 1 << 26

// ScratchFloats implements tensor.ScratchSizer: few launches over many
// images, bounded so that a large batch does not spend its memory on
// scratch.
func (d *Device) ScratchFloats() int { return d.scratch }

// HasCUBLAS reports whether GEMM runs on cuBLAS (else a reference kernel).
func (d *Device) HasCUBLAS() bool { return d.blas != nil }

// enter makes the device's context current on this OS thread for the
// duration of a call; leave undoes the thread lock. Goroutines move
// between threads, so the context is set on every call.
func (d *Device) enter() bool {
	if d.dead {
		return false
	}
	runtime.LockOSThread()
	if r := d.cu.SetCurrent(d.ctx); r != driver.Success {
		d.fail(d.cu.Check("cuCtxSetCurrent", r))
	}
	return true
}

func (d *Device) leave() { runtime.UnlockOSThread() }

func (d *Device) fail(err error) {
	if d.err == nil && err != nil {
		d.err = err
	}
}

// Err returns the sticky error without waiting or clearing it.
func (d *Device) Err() error { return d.err }

// Sync waits for the stream, then returns and clears the first error since
// the last Sync, including bad labels found by the loss kernels.
func (d *Device) Sync() error {
	if d.dead {
		err := d.err
		d.err = nil
		return err
	}
	d.enter()
	defer d.leave()
	if d.statusOp != "" {
		d.fail(d.cu.Check("cuMemcpyDtoHAsync", d.cu.MemcpyDtoHAsync(unsafe.Pointer(&d.hostStat), d.status, 4, d.stream)))
	}
	d.fail(d.cu.Check("cuStreamSynchronize", d.cu.StreamSynchronize(d.stream)))
	if d.statusOp != "" {
		if d.hostStat != 0 {
			d.fail(&tensor.ArgError{Op: d.statusOp, Reason: "label outside [0, c)"})
			d.cu.MemsetD32Async(d.status, 0, 1, d.stream)
			d.cu.StreamSynchronize(d.stream)
		}
		d.statusOp, d.hostStat = "", 0
	}
	d.keep, d.keepI = d.keep[:0], d.keepI[:0]
	err := d.err
	d.err = nil
	return err
}

// Close waits for queued work and frees everything; later use fails.
func (d *Device) Close() error {
	if d.dead {
		return nil
	}
	err := d.Sync()
	d.release()
	return err
}

// release frees what open acquired (also after a partial open).
func (d *Device) release() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cu := d.cu
	if d.ctx != 0 {
		cu.CtxSetCurrent(d.ctx)
	}
	for a := range d.allocs {
		cu.MemFree(a.p)
		a.p, a.t = 0, 0
	}
	d.allocs = nil
	d.closeCUDNN()
	if d.part != 0 {
		cu.MemFree(d.part)
		d.part = 0
	}
	if d.blas != nil {
		d.blas.Destroy(d.blasH)
		d.blas = nil
	}
	if d.status != 0 {
		cu.MemFree(d.status)
		d.status = 0
	}
	for _, m := range d.mods {
		cu.ModuleUnload(m)
	}
	d.mods = nil
	if d.stream != 0 {
		cu.StreamDestroy(d.stream)
		d.stream = 0
	}
	if d.ctx != 0 {
		cu.DevicePrimaryCtxRelease(d.dev)
		d.ctx = 0
	}
	d.dead = true
}
