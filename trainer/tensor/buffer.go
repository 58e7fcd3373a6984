package tensor

// DType is the element type of a device allocation.
type DType uint8

const (
	// F32 is IEEE-754 binary32, the type of activations and parameters.
	F32 DType = iota + 1
	// I32 is a 32-bit signed integer (labels, pooling indices).
	I32
)

func (t DType) String() string {
	switch t {
	case F32:
		return "f32"
	case I32:
		return "i32"
	}
	return "invalid"
}

// Allocation is one block of device memory. Devices implement it; callers
// use it only through Buffer.
type Allocation interface {
	Device() Device
	DType() DType
	Len() int
}

// Buffer is a view [off, off+n) of an Allocation. It is a small value: slicing
// allocates nothing, which keeps per-image and per-replica views free. The
// zero Buffer is invalid and every kernel rejects it.
type Buffer struct {
	a      Allocation
	off, n int
}

// NewBuffer returns a view of all of a. Device implementations call it.
func NewBuffer(a Allocation) Buffer { return Buffer{a: a, n: a.Len()} }

// Alloc returns the allocation the view belongs to.
func (b Buffer) Alloc() Allocation { return b.a }

// Offset returns the view's first element within its allocation.
func (b Buffer) Offset() int { return b.off }

// Len returns the number of elements in the view.
func (b Buffer) Len() int { return b.n }

// Valid reports whether b views an allocation.
func (b Buffer) Valid() bool { return b.a != nil }

// DType returns the element type (0 for the zero Buffer).
func (b Buffer) DType() DType {
	if b.a == nil {
		return 0
	}
	return b.a.DType()
}

// Device returns the owning device (nil for the zero Buffer).
func (b Buffer) Device() Device {
	if b.a == nil {
		return nil
	}
	return b.a.Device()
}

// Slice returns the view [off, off+n) of b. Out-of-range arguments give the
// zero Buffer, which kernels reject with ErrArg rather than panic.
func (b Buffer) Slice(off, n int) Buffer {
	if b.a == nil || off < 0 || n < 0 || off+n > b.n {
		return Buffer{}
	}
	return Buffer{a: b.a, off: b.off + off, n: n}
}
