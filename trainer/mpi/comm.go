package mpi

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"unsafe"

	"github.com/loaderd/loaderd/trainer/parallel"
	"github.com/loaderd/loaderd/trainer/tensor"
)

// Comm is this process's rank of MPI_COMM_WORLD as a parallel.Collective.
// Buffers of any tensor.Device are staged through host memory (CopyOut,
// the MPI call in place, CopyIn); for the CPU device that is one memcpy
// each way. MPI reports errors instead of aborting the job
// (MPI_ERRORS_RETURN), and a Comm is safe for use by one goroutine at a
// time from any OS thread (MPI_THREAD_SERIALIZED).
type Comm struct {
	l          *Lib
	rank, size int
	mu         sync.Mutex
	host       []float32
	err        error // set by Abort
	owned      bool  // Init called MPI_Init_thread, so Finalize ends MPI
}

// Init loads libmpi (see Load; path "" searches the loader's path) and
// initialises MPI for this process. Under mpirun each process learns its
// rank and the world from the launcher; started alone it is a world of one.
func Init(path string) (*Comm, error) {
	l, err := Load(path)
	if err != nil {
		return nil, err
	}
	c := &Comm{l: l}
	var flag int32
	if err := l.check("MPI_Initialized", l.initialized(&flag)); err != nil {
		return nil, err
	}
	if flag == 0 {
		var provided int32
		if err := l.check("MPI_Init_thread", l.initThread(nil, nil, threadSerialized, &provided)); err != nil {
			return nil, err
		}
		c.owned = true
		if provided < threadSerialized {
			c.Finalize()
			return nil, fmt.Errorf("mpi: the library provides thread level %d; the trainer needs MPI_THREAD_SERIALIZED (%d)",
				provided, threadSerialized)
		}
	}
	// Errors come back as codes (a peer that closed its connection, say)
	// instead of MPI_ERRORS_ARE_FATAL aborting every rank.
	if err := l.check("MPI_Comm_set_errhandler", l.setErrh(l.world, l.errorsReturn)); err != nil {
		return nil, err
	}
	var r, s int32
	if err := l.check("MPI_Comm_rank", l.commRank(l.world, &r)); err != nil {
		return nil, err
	}
	if err := l.check("MPI_Comm_size", l.commSize(l.world, &s)); err != nil {
		return nil, err
	}
	c.rank, c.size = int(r), int(s)
	return c, nil
}

func (c *Comm) Rank() int { return c.rank }
func (c *Comm) Size() int { return c.size }

// Path returns the library file in use.
func (c *Comm) Path() string { return c.l.path }

// Abort makes this rank's later collectives fail with parallel.ErrAborted.
// It cannot reach the other processes: MPI has no way to interrupt a peer's
// pending collective short of MPI_Abort, which ends the whole job without
// a word. trainer/dist's failure monitor tells the other ranks.
func (c *Comm) Abort(cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = fmt.Errorf("%w: %w", parallel.ErrAborted, cause)
	}
}

// Finalize ends MPI (when Init started it); the Comm is unusable after.
func (c *Comm) Finalize() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = fmt.Errorf("mpi: finalized: %w", parallel.ErrAborted)
	}
	if !c.owned {
		return nil
	}
	c.owned = false
	var flag int32
	if c.l.finalized(&flag); flag != 0 {
		return nil
	}
	return c.l.check("MPI_Finalize", c.l.finalize())
}

// stage checks b and copies it to the host staging buffer when out is set.
func (c *Comm) stage(b tensor.Buffer, out bool) ([]float32, error) {
	if c.err != nil {
		return nil, c.err
	}
	if !b.Valid() || b.DType() != tensor.F32 {
		return nil, fmt.Errorf("mpi: rank %d: want an f32 buffer: %w", c.rank, parallel.ErrConfig)
	}
	n := b.Len()
	if n > math.MaxInt32 {
		return nil, fmt.Errorf("mpi: %d elements exceed MPI's int count: %w", n, parallel.ErrConfig)
	}
	if cap(c.host) < n {
		c.host = make([]float32, n)
	}
	h := c.host[:n]
	if out {
		if err := b.Device().CopyOut(h, b); err != nil {
			return nil, fmt.Errorf("mpi: rank %d: %w", c.rank, err)
		}
	}
	return h, nil
}

// unstage copies the host result back into b and waits for the copy.
func (c *Comm) unstage(b tensor.Buffer, h []float32) error {
	d := b.Device()
	if err := d.CopyIn(b, h); err != nil {
		return fmt.Errorf("mpi: rank %d: %w", c.rank, err)
	}
	if err := d.Sync(); err != nil {
		return fmt.Errorf("mpi: rank %d: %w", c.rank, err)
	}
	return nil
}

// scaleAvg turns a sum into a mean the way the host-memory group does
// (multiplying by 1/size), so both give the same bits.
func (c *Comm) scaleAvg(h []float32, op parallel.Op) {
	if op != parallel.Avg {
		return
	}
	inv := 1 / float32(c.size)
	for i := range h {
		h[i] *= inv
	}
}

// AllReduce sums b over the ranks (Avg: then divides by Size); Open MPI
// gives every rank the same bits.
func (c *Comm) AllReduce(b tensor.Buffer, op parallel.Op) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, err := c.stage(b, true)
	if err != nil {
		return err
	}
	if c.size > 1 {
		code := c.l.allreduce(inPlace, unsafe.Pointer(&h[0]), int32(len(h)), c.l.float, c.l.sum, c.l.world)
		runtime.KeepAlive(h)
		if err := c.l.check("MPI_Allreduce", code); err != nil {
			return fmt.Errorf("mpi: rank %d: %w", c.rank, err)
		}
	}
	c.scaleAvg(h, op)
	return c.unstage(b, h)
}

// Reduce leaves the reduction in root's b; other ranks' b is unchanged.
func (c *Comm) Reduce(b tensor.Buffer, op parallel.Op, root int) error {
	if root < 0 || root >= c.size {
		return fmt.Errorf("mpi: root %d of %d ranks: %w", root, c.size, parallel.ErrConfig)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	h, err := c.stage(b, true)
	if err != nil {
		return err
	}
	if c.size > 1 {
		send := inPlace
		if c.rank != root {
			send = uintptr(unsafe.Pointer(&h[0])) // h stays referenced by c.host
		}
		code := c.l.reduce(send, unsafe.Pointer(&h[0]), int32(len(h)), c.l.float, c.l.sum, int32(root), c.l.world)
		runtime.KeepAlive(h)
		if err := c.l.check("MPI_Reduce", code); err != nil {
			return fmt.Errorf("mpi: rank %d: %w", c.rank, err)
		}
	}
	if c.rank != root {
		return nil
	}
	c.scaleAvg(h, op)
	return c.unstage(b, h)
}

// Broadcast copies root's b to every rank's b.
func (c *Comm) Broadcast(b tensor.Buffer, root int) error {
	if root < 0 || root >= c.size {
		return fmt.Errorf("mpi: root %d of %d ranks: %w", root, c.size, parallel.ErrConfig)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	h, err := c.stage(b, c.rank == root)
	if err != nil {
		return err
	}
	if c.size == 1 {
		return nil
	}
	code := c.l.bcast(unsafe.Pointer(&h[0]), int32(len(h)), c.l.float, int32(root), c.l.world)
	runtime.KeepAlive(h)
	if err := c.l.check("MPI_Bcast", code); err != nil {
		return fmt.Errorf("mpi: rank %d: %w", c.rank, err)
	}
	if c.rank == root {
		return nil
	}
	return c.unstage(b, h)
}

// BroadcastBytes copies root's p to every rank's p (equal lengths): how
// trainer/dist hands out the address of its failure monitor.
func (c *Comm) BroadcastBytes(p []byte, root int) error {
	if root < 0 || root >= c.size || len(p) == 0 || len(p) > math.MaxInt32 {
		return fmt.Errorf("mpi: broadcast of %d bytes from root %d of %d: %w", len(p), root, c.size, parallel.ErrConfig)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	if c.size == 1 {
		return nil
	}
	code := c.l.bcast(unsafe.Pointer(&p[0]), int32(len(p)), c.l.byte_, int32(root), c.l.world)
	runtime.KeepAlive(p)
	return c.l.check("MPI_Bcast", code)
}

var _ parallel.Collective = (*Comm)(nil)
