package nccl

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/ebitengine/purego"
	"github.com/loaderd/loaderd/trainer/cuda/driver"
	"github.com/loaderd/loaderd/trainer/parallel"
	"github.com/loaderd/loaderd/trainer/tensor"

	"github.com/loaderd/loaderd/trainer/internal/dynlib"
)

// Names are the library files Load tries.
var Names = []string{"libnccl.so.2", "libnccl.so"}

var (
	// ErrNotFound reports that libnccl could not be loaded.
	ErrNotFound = errors.New("nccl: library not found")
	// ErrSymbol reports a libnccl without a function the bindings need.
	ErrSymbol = errors.New("nccl: missing symbol")
)

// IDSize is the size of ncclUniqueId.
const IDSize = 128

// UniqueID is ncclUniqueId, passed by value to ncclCommInitRank.
type UniqueID struct{ Internal [IDSize]byte }

// NCCL enums (nccl.h).
const (
	float32T = 7 // ncclFloat32
	opSum    = 0 // ncclSum
)

// Error is a failed NCCL call.
type Error struct {
	Op   string
	Code int32
	Msg  string
}

func (e *Error) Error() string {
	return fmt.Sprintf("nccl: %s: %s (ncclResult_t %d)", e.Op, e.Msg, e.Code)
}

// Lib is a loaded libnccl.
type Lib struct {
	path   string
	handle uintptr

	getUniqueID  func(id *UniqueID) int32
	commInitRank func(comm *uintptr, nranks int32, id UniqueID, rank int32) int32
	allReduce    func(send, recv driver.DevicePtr, count uint64, dtype, op int32, comm uintptr, s driver.Stream) int32
	reduce       func(send, recv driver.DevicePtr, count uint64, dtype, op, root int32, comm uintptr, s driver.Stream) int32
	broadcast    func(send, recv driver.DevicePtr, count uint64, dtype, root int32, comm uintptr, s driver.Stream) int32
	commDestroy  func(comm uintptr) int32
	commAbort    func(comm uintptr) int32
	errorString  func(code int32) string
}

// Load opens libnccl (path, else Names through the loader's search path).
// A missing library wraps ErrNotFound, a missing function ErrSymbol; it
// never panics.
func Load(path string) (*Lib, error) {
	names := Names
	if path != "" {
		names = []string{path}
	}
	h, n, err := dynlib.OpenFirst(names)
	if err != nil {
		return nil, fmt.Errorf("%w: tried %s: %v", ErrNotFound, strings.Join(names, ", "), err)
	}
	l := &Lib{path: n, handle: h}
	if err := l.bind(); err != nil {
		purego.Dlclose(h)
		return nil, err
	}
	return l, nil
}

func (l *Lib) bind() error {
	err := dynlib.Bind(l.handle, []dynlib.Func{
		{Ptr: &l.getUniqueID, Name: "ncclGetUniqueId"}, {Ptr: &l.commInitRank, Name: "ncclCommInitRank"},
		{Ptr: &l.allReduce, Name: "ncclAllReduce"}, {Ptr: &l.reduce, Name: "ncclReduce"}, {Ptr: &l.broadcast, Name: "ncclBroadcast"},
		{Ptr: &l.commDestroy, Name: "ncclCommDestroy"}, {Ptr: &l.commAbort, Name: "ncclCommAbort"}, {Ptr: &l.errorString, Name: "ncclGetErrorString"},
	})
	var me *dynlib.MissingError
	if errors.As(err, &me) {
		return fmt.Errorf("%w %s in %s", ErrSymbol, me.Name, l.path)
	}
	if err != nil {
		return fmt.Errorf("nccl: %w", err)
	}
	return nil
}

func (l *Lib) check(op string, code int32) error {
	if code == 0 {
		return nil
	}
	return &Error{Op: op, Code: code, Msg: l.errorString(code)}
}

// NewUniqueID returns a fresh ncclUniqueId (rank 0 makes it; the
// rendezvous hands it to the others).
func (l *Lib) NewUniqueID() ([]byte, error) {
	var id UniqueID
	if err := l.check("ncclGetUniqueId", l.getUniqueID(&id)); err != nil {
		return nil, err
	}
	return id.Internal[:], nil
}

// Device is what a communicator needs of a GPU; *cuda.Device implements it.
type Device interface {
	tensor.Device
	Stream() driver.Stream
	Pointer(b tensor.Buffer) (driver.DevicePtr, bool)
	Do(f func()) error
}

// Comm is one rank's NCCL communicator on a device, as a
// parallel.Collective. Collectives are enqueued on the device's stream,
// ordered with its kernels, and return without waiting; their errors,
// like a kernel's, surface at the device's next Sync. Abort may be called
// from any goroutine: it aborts the communicator (ncclCommAbort), which
// ends a collective that waits for a dead rank.
type Comm struct {
	l          *Lib
	dev        Device
	rank, size int
	mu         sync.Mutex
	comm       uintptr
	err        error
}

// InitRank joins rank of world on dev with the id from rank 0
// (ncclCommInitRank; collective: every rank calls it).
func (l *Lib) InitRank(dev Device, world, rank int, id []byte) (*Comm, error) {
	if len(id) != IDSize || world < 1 || rank < 0 || rank >= world {
		return nil, fmt.Errorf("nccl: rank %d of %d with a %d-byte id: %w", rank, world, len(id), parallel.ErrConfig)
	}
	var uid UniqueID
	copy(uid.Internal[:], id)
	c := &Comm{l: l, dev: dev, rank: rank, size: world}
	var code int32
	if err := dev.Do(func() { code = l.commInitRank(&c.comm, int32(world), uid, int32(rank)) }); err != nil {
		return nil, err
	}
	if err := l.check("ncclCommInitRank", code); err != nil {
		return nil, fmt.Errorf("nccl: rank %d of %d: %w", rank, world, err)
	}
	return c, nil
}

func (c *Comm) Rank() int { return c.rank }
func (c *Comm) Size() int { return c.size }

// Abort fails later collectives and aborts the communicator.
func (c *Comm) Abort(cause error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = fmt.Errorf("%w: %w", parallel.ErrAborted, cause)
	}
	comm := c.comm
	c.comm = 0
	c.mu.Unlock()
	if comm != 0 {
		c.l.commAbort(comm)
	}
}

// Destroy frees the communicator after its pending work.
func (c *Comm) Destroy() error {
	c.mu.Lock()
	comm := c.comm
	c.comm = 0
	if c.err == nil {
		c.err = fmt.Errorf("nccl: communicator destroyed: %w", parallel.ErrAborted)
	}
	c.mu.Unlock()
	if comm == 0 {
		return nil
	}
	var code int32
	if err := c.dev.Do(func() { code = c.l.commDestroy(comm) }); err != nil {
		return err
	}
	return c.l.check("ncclCommDestroy", code)
}

// call checks b, then runs one NCCL call on the device's thread.
func (c *Comm) call(op string, b tensor.Buffer, f func(p driver.DevicePtr, n uint64, comm uintptr) int32) error {
	c.mu.Lock()
	err, comm := c.err, c.comm
	c.mu.Unlock()
	if err != nil {
		return err
	}
	p, ok := c.dev.Pointer(b)
	if !ok {
		return fmt.Errorf("nccl: rank %d: %s: not an f32 buffer of %s: %w", c.rank, op, c.dev.Name(), parallel.ErrConfig)
	}
	var code int32
	if err := c.dev.Do(func() { code = f(p, uint64(b.Len()), comm) }); err != nil {
		return err
	}
	if err := c.l.check(op, code); err != nil {
		return fmt.Errorf("nccl: rank %d: %w", c.rank, err)
	}
	return nil
}

// AllReduce sums in place (ring order: every rank gets the same bits);
// Avg then scales by 1/Size on the device, as the host group does.
func (c *Comm) AllReduce(b tensor.Buffer, op parallel.Op) error {
	err := c.call("ncclAllReduce", b, func(p driver.DevicePtr, n uint64, comm uintptr) int32 {
		return c.l.allReduce(p, p, n, float32T, opSum, comm, c.dev.Stream())
	})
	if err == nil && op == parallel.Avg {
		c.dev.Scale(b, 1/float32(c.size))
	}
	return err
}

// Reduce leaves the reduction in root's b; other ranks' b is unchanged.
func (c *Comm) Reduce(b tensor.Buffer, op parallel.Op, root int) error {
	if root < 0 || root >= c.size {
		return fmt.Errorf("nccl: root %d of %d ranks: %w", root, c.size, parallel.ErrConfig)
	}
	err := c.call("ncclReduce", b, func(p driver.DevicePtr, n uint64, comm uintptr) int32 {
		return c.l.reduce(p, p, n, float32T, opSum, int32(root), comm, c.dev.Stream())
	})
	if err == nil && op == parallel.Avg && c.rank == root {
		c.dev.Scale(b, 1/float32(c.size))
	}
	return err
}

// Broadcast copies root's b to every rank's b, in place.
func (c *Comm) Broadcast(b tensor.Buffer, root int) error {
	if root < 0 || root >= c.size {
		return fmt.Errorf("nccl: root %d of %d ranks: %w", root, c.size, parallel.ErrConfig)
	}
	return c.call("ncclBroadcast", b, func(p driver.DevicePtr, n uint64, comm uintptr) int32 {
		return c.l.broadcast(p, p, n, float32T, int32(root), comm, c.dev.Stream())
	})
}

var _ parallel.Collective = (*Comm)(nil)
