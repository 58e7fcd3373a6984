package cuda

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/loaderd/loaderd/trainer/cuda/driver"
	"github.com/loaderd/loaderd/trainer/tensor"
)

// alloc is one cuMemAlloc block; p == 0 once freed.
type alloc struct {
	dev *Device
	t   tensor.DType
	n   int
	p   driver.DevicePtr
}

func (a *alloc) Device() tensor.Device { return a.dev }
func (a *alloc) DType() tensor.DType   { return a.t }
func (a *alloc) Len() int              { return a.n }

func argError(op, format string, a ...any) error {
	return &tensor.ArgError{Op: op, Reason: fmt.Sprintf(format, a...)}
}

// Alloc returns a zeroed allocation of n elements (at most 2³¹−1, the
// kernels' index range).
func (d *Device) Alloc(t tensor.DType, n int) (tensor.Buffer, error) {
	if d.dead {
		return tensor.Buffer{}, fmt.Errorf("tensor: alloc on %s: %w", d.name, tensor.ErrClosed)
	}
	if n <= 0 || n > math.MaxInt32 {
		return tensor.Buffer{}, argError("alloc", "length %d", n)
	}
	if t != tensor.F32 && t != tensor.I32 {
		return tensor.Buffer{}, argError("alloc", "dtype %v", t)
	}
	d.enter()
	defer d.leave()
	a := &alloc{dev: d, t: t, n: n}
	if r := d.cu.MemAlloc(&a.p, uint64(n)*4); r != driver.Success {
		err := d.cu.Check("cuMemAlloc", r)
		if r == driver.ErrorOutOfMemory { // callers may free memory and retry with less
			return tensor.Buffer{}, fmt.Errorf("cuda: alloc %d×%v on %s: %w: %w", n, t, d.name, tensor.ErrOutOfMemory, err)
		}
		return tensor.Buffer{}, fmt.Errorf("cuda: alloc %d×%v on %s: %w", n, t, d.name, err)
	}
	if err := d.cu.Check("cuMemsetD32Async", d.cu.MemsetD32Async(a.p, 0, uint64(n), d.stream)); err != nil {
		d.cu.MemFree(a.p)
		return tensor.Buffer{}, fmt.Errorf("cuda: alloc on %s: %w", d.name, err)
	}
	d.allocs[a] = struct{}{}
	return tensor.NewBuffer(a), nil
}

// Free waits for queued work, then releases b's allocation; earlier
// errors stay sticky for Sync.
func (d *Device) Free(b tensor.Buffer) error {
	a, ok := d.own("free", b)
	if !ok {
		return d.Sync()
	}
	d.enter()
	defer d.leave()
	// Wait for queued work on the block; a failure there stays sticky for
	// Sync, as the kernels' errors do, rather than being returned here.
	d.fail(d.cu.Check("cuStreamSynchronize", d.cu.StreamSynchronize(d.stream)))
	err := d.cu.Check("cuMemFree", d.cu.MemFree(a.p))
	delete(d.allocs, a)
	a.p, a.t = 0, 0
	if err != nil {
		return fmt.Errorf("cuda: free on %s: %w", d.name, err)
	}
	return nil
}

// own checks that b is a live view of an allocation of d.
func (d *Device) own(op string, b tensor.Buffer) (*alloc, bool) {
	if d.dead {
		d.fail(fmt.Errorf("tensor: %s on %s: %w", op, d.name, tensor.ErrClosed))
		return nil, false
	}
	a, ok := b.Alloc().(*alloc)
	switch {
	case !b.Valid():
		d.fail(argError(op, "invalid (zero) buffer"))
	case !ok || a.dev != d:
		d.fail(fmt.Errorf("tensor: %s on %s: %w", op, d.name, tensor.ErrDevice))
	case a.p == 0:
		d.fail(argError(op, "buffer was freed"))
	default:
		return a, true
	}
	return nil, false
}

// check validates b as CPU.check does and returns the device address of
// its first element: of dtype t and length n (any length when n < 0).
func (d *Device) check(op string, b tensor.Buffer, t tensor.DType, n int) (driver.DevicePtr, bool) {
	a, ok := d.own(op, b)
	switch {
	case !ok:
	case a.t != t:
		d.fail(argError(op, "dtype %v, want %v", a.t, t))
	case n >= 0 && b.Len() != n:
		d.fail(argError(op, "length %d, want %d", b.Len(), n))
	default:
		return a.p + driver.DevicePtr(b.Offset()*4), true
	}
	return 0, false
}

// fp is check for an f32 buffer of n elements (n < 0: any).
func (d *Device) fp(op string, b tensor.Buffer, n int) (driver.DevicePtr, bool) {
	return d.check(op, b, tensor.F32, n)
}

// CopyIn queues a host → device copy; src must stay untouched until Sync.
func (d *Device) CopyIn(dst tensor.Buffer, src []float32) error {
	p, ok := d.fp("copyin", dst, len(src))
	if !ok {
		return d.Sync()
	}
	if len(src) == 0 {
		return nil
	}
	d.enter()
	defer d.leave()
	d.keep = append(d.keep, src)
	return d.cu.Check("cuMemcpyHtoDAsync", d.cu.MemcpyHtoDAsync(p, unsafe.Pointer(&src[0]), uint64(len(src))*4, d.stream))
}

// CopyInInt32 queues a host → device copy of int32 data.
func (d *Device) CopyInInt32(dst tensor.Buffer, src []int32) error {
	p, ok := d.check("copyin", dst, tensor.I32, len(src))
	if !ok {
		return d.Sync()
	}
	if len(src) == 0 {
		return nil
	}
	d.enter()
	defer d.leave()
	d.keepI = append(d.keepI, src)
	return d.cu.Check("cuMemcpyHtoDAsync", d.cu.MemcpyHtoDAsync(p, unsafe.Pointer(&src[0]), uint64(len(src))*4, d.stream))
}

// CopyOut reports any sticky error, then copies device → host and waits.
func (d *Device) CopyOut(dst []float32, src tensor.Buffer) error {
	if err := d.Sync(); err != nil {
		return err
	}
	p, ok := d.fp("copyout", src, len(dst))
	if !ok {
		return d.Sync()
	}
	if len(dst) == 0 {
		return nil
	}
	d.enter()
	defer d.leave()
	if err := d.cu.Check("cuMemcpyDtoHAsync", d.cu.MemcpyDtoHAsync(unsafe.Pointer(&dst[0]), p, uint64(len(dst))*4, d.stream)); err != nil {
		return err
	}
	return d.cu.Check("cuStreamSynchronize", d.cu.StreamSynchronize(d.stream))
}

// Copy queues a device → device copy (equal lengths).
func (d *Device) Copy(dst, src tensor.Buffer) {
	s, ok1 := d.fp("copy", src, -1)
	t, ok2 := d.fp("copy", dst, src.Len())
	if !ok1 || !ok2 || !d.enter() {
		return
	}
	defer d.leave()
	d.fail(d.cu.Check("cuMemcpyDtoDAsync", d.cu.CopyDtoD(t, s, uint64(src.Len())*4, d.stream)))
}

// RegisterHost page-locks host memory (for example loaderd's shared-memory
// batches) so that copies from it are DMA and overlap compute. Unregister
// before unmapping it.
func (d *Device) RegisterHost(mem []byte) error {
	if len(mem) == 0 || d.dead {
		return argError("register_host", "empty memory or closed device")
	}
	d.enter()
	defer d.leave()
	return d.cu.Check("cuMemHostRegister", d.cu.MemHostRegister(unsafe.Pointer(&mem[0]), uint64(len(mem)), driver.MemHostRegisterPortable))
}

// RegisterHostReadOnly page-locks read-only host memory, such as the
// client's read-only mapping of loaderd's shared region, with
// CU_MEMHOSTREGISTER_READ_ONLY (drivers of CUDA 11.1 and later; older ones
// cannot register a read-only mapping, and this returns their error).
// The registration is portable: every context on the machine copies
// from it by DMA. Unregister with UnregisterHost before unmapping it.
func (d *Device) RegisterHostReadOnly(mem []byte) error {
	if len(mem) == 0 || d.dead {
		return argError("register_host", "empty memory or closed device")
	}
	d.enter()
	defer d.leave()
	return d.cu.Check("cuMemHostRegister(READ_ONLY)", d.cu.MemHostRegister(unsafe.Pointer(&mem[0]), uint64(len(mem)),
		driver.MemHostRegisterPortable|driver.MemHostRegisterReadOnly))
}

// UnregisterHost undoes RegisterHost or RegisterHostReadOnly.
func (d *Device) UnregisterHost(mem []byte) error {
	if len(mem) == 0 || d.dead {
		return argError("unregister_host", "empty memory or closed device")
	}
	d.enter()
	defer d.leave()
	return d.cu.Check("cuMemHostUnregister", d.cu.MemHostUnregister(unsafe.Pointer(&mem[0])))
}
