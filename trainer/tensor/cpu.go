package tensor

import (
	"fmt"
	"sync/atomic"
)

// CPU is a host Device with its own pool of worker goroutines. Kernels run
// synchronously on the calling goroutine plus up to Workers()-1 helpers.
type CPU struct {
	name string
	nw   int
	ch   []chan *job
	pool chan *job
	err  error
	dead bool
	a    kargs // arguments of the kernel in flight (one at a time per device)
	ws   [][]float32
	gk   gemmKernel

	limit, used int64 // bytes (SetMemoryLimit); limit 0: none

	// Range functions bound once so that dispatching a kernel allocates nothing.
	fnGemm, fnIm2Col, fnCol2Im, fnPool, fnPoolB, fnT12     rangeFn
	fnElem, fnChan, fnRow, fnBN, fnBNB, fnCE, fnCEB, fnSGD rangeFn
}

// rangeFn processes [lo, hi) as participant w (0 is the calling goroutine),
// which indexes per-worker scratch.
type rangeFn func(w, lo, hi int)

// job is one parallel kernel launch. Participants claim chunks from next;
// the caller returns once done == chunks, without waiting for helpers that
// have not woken yet (on a loaded machine that can take a time slice): a
// late helper finds no chunk left and only drops its reference. The job
// goes back to the pool when the last reference is dropped.
type job struct {
	f          rangeFn
	n, chunks  int
	next, done atomic.Int64
	refs       atomic.Int32
	fin        chan struct{}
	pool       chan *job
}

// run claims and processes chunks; it reports whether it finished the last.
func (j *job) run(w int) bool {
	last := false
	for {
		c := int(j.next.Add(1) - 1)
		if c >= j.chunks {
			return last
		}
		j.f(w, j.n*c/j.chunks, j.n*(c+1)/j.chunks)
		if int(j.done.Add(1)) == j.chunks {
			last = true
		}
	}
}

func (j *job) release() {
	if j.refs.Add(-1) == 0 {
		select {
		case j.pool <- j:
		default: // pool full: let the GC have it
		}
	}
}

// A helper lags by at most helperQueue queued jobs plus the one it runs,
// and every helper shares each job, so jobPool jobs never run out.
const (
	helperQueue = 16
	jobPool     = helperQueue + 4
)

// NewCPU returns a CPU device that uses up to workers goroutines (≥ 1).
func NewCPU(name string, workers int) (*CPU, error) {
	if workers < 1 || workers > 1024 {
		return nil, fmt.Errorf("tensor: NewCPU %q: workers %d out of range: %w", name, workers, ErrArg)
	}
	d := &CPU{name: name, nw: workers, gk: bestKernel(), pool: make(chan *job, jobPool)}
	d.ws = make([][]float32, workers)
	for range jobPool {
		d.pool <- &job{fin: make(chan struct{}, 1), pool: d.pool}
	}
	for w := 1; w < workers; w++ {
		c := make(chan *job, helperQueue)
		d.ch = append(d.ch, c)
		go helper(c, w)
	}
	d.fnGemm, d.fnIm2Col, d.fnCol2Im = d.gemmRange, d.im2colRange, d.col2imRange
	d.fnPool, d.fnPoolB, d.fnT12 = d.poolRange, d.poolBackRange, d.t12Range
	d.fnElem, d.fnChan, d.fnRow = d.elemRange, d.chanRange, d.rowRange
	d.fnBN, d.fnBNB, d.fnCE, d.fnCEB, d.fnSGD = d.bnRange, d.bnBackRange, d.ceRange, d.ceBackRange, d.sgdRange
	return d, nil
}

func helper(c chan *job, w int) {
	for j := range c {
		if j.run(w) {
			j.fin <- struct{}{}
		}
		j.release()
	}
}

// Name returns the name given to NewCPU.
func (d *CPU) Name() string { return d.name }

// Workers returns the goroutine budget.
func (d *CPU) Workers() int { return d.nw }

func (d *CPU) String() string { return fmt.Sprintf("cpu:%s(%d workers)", d.name, d.nw) }

// Close stops the helper goroutines. Buffers stay readable by the GC only.
func (d *CPU) Close() error {
	if d.dead {
		return nil
	}
	d.dead = true
	for _, c := range d.ch {
		close(c)
	}
	return nil
}

// Sync returns and clears the sticky error; CPU work is already done.
func (d *CPU) Sync() error {
	err := d.err
	d.err = nil
	return err
}

// Err returns the sticky error without clearing it.
func (d *CPU) Err() error { return d.err }

func (d *CPU) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

// par runs f over [0, n) in chunks of at least grain, shared dynamically
// between the caller and up to Workers()-1 helpers.
func (d *CPU) par(n, grain int, f rangeFn) {
	grain = max(grain, 1)
	nw := min(d.nw, (n+grain-1)/grain)
	if nw <= 1 {
		if n > 0 {
			f(0, 0, n)
		}
		return
	}
	var j *job
	select {
	case j = <-d.pool:
	default:
		j = &job{fin: make(chan struct{}, 1), pool: d.pool}
	}
	// A few chunks per worker let a prompt worker take over a slow one's share.
	j.f, j.n, j.chunks = f, n, min(4*nw, (n+grain-1)/grain)
	j.next.Store(0)
	j.done.Store(0)
	j.refs.Store(int32(nw))
	for w := 1; w < nw; w++ {
		d.ch[w-1] <- j
	}
	if !j.run(0) {
		<-j.fin // a helper finished the last chunk
	}
	j.release()
}

type cpuAlloc struct {
	dev *CPU
	t   DType
	f   []float32
	i   []int32
}

func (a *cpuAlloc) Device() Device { return a.dev }
func (a *cpuAlloc) DType() DType   { return a.t }
func (a *cpuAlloc) Len() int {
	if a.t == I32 {
		return len(a.i)
	}
	return len(a.f)
}

// Alloc returns a zeroed buffer of n elements.
func (d *CPU) Alloc(t DType, n int) (Buffer, error) {
	if d.dead {
		return Buffer{}, fmt.Errorf("tensor: alloc on %s: %w", d.name, ErrClosed)
	}
	if n <= 0 {
		return Buffer{}, argErr("alloc", "length %d", n)
	}
	if d.limit > 0 && d.used+4*int64(n) > d.limit {
		return Buffer{}, fmt.Errorf("tensor: alloc %d×%v on %s: %d of its %d-byte limit left: %w",
			n, t, d.name, d.limit-d.used, d.limit, ErrOutOfMemory)
	}
	a := &cpuAlloc{dev: d, t: t}
	switch t {
	case F32:
		a.f = make([]float32, n)
	case I32:
		a.i = make([]int32, n)
	default:
		return Buffer{}, argErr("alloc", "dtype %v", t)
	}
	d.used += 4 * int64(n)
	return NewBuffer(a), nil
}

// SetMemoryLimit makes Alloc fail with ErrOutOfMemory once the live
// allocations would exceed limit bytes (0: no limit), as a GPU's memory
// does; --batch auto's search runs against it on CPU devices.
func (d *CPU) SetMemoryLimit(limit int64) { d.limit = limit }

// Free drops the allocation's memory (the GC reclaims it); views of it fail
// from now on.
func (d *CPU) Free(b Buffer) error {
	a, ok := d.check("free", b, b.DType(), 0, true)
	if !ok {
		return d.Sync()
	}
	d.used -= 4 * int64(len(a.f)+len(a.i))
	a.f, a.i, a.t = nil, nil, 0
	return nil
}

// check validates b for op: owned by d, of type t, of length n (anyLen:
// any length). A negative n (sizes from bad shape arguments) is an error.
func (d *CPU) check(op string, b Buffer, t DType, n int, anyLen bool) (*cpuAlloc, bool) {
	if d.dead {
		d.fail(fmt.Errorf("tensor: %s on %s: %w", op, d.name, ErrClosed))
		return nil, false
	}
	a, ok := b.a.(*cpuAlloc)
	switch {
	case b.a == nil:
		d.fail(argErr(op, "invalid (zero) buffer"))
	case !ok || a.dev != d:
		d.fail(fmt.Errorf("tensor: %s on %s: %w", op, d.name, ErrDevice))
	case a.t == 0:
		d.fail(argErr(op, "buffer was freed"))
	case a.t != t:
		d.fail(argErr(op, "dtype %v, want %v", a.t, t))
	case !anyLen && b.n != n:
		d.fail(argErr(op, "length %d, want %d", b.n, n))
	default:
		return a, true
	}
	return nil, false
}

// fv returns b's float32 slice, which must hold n elements, or nil after
// recording an error.
func (d *CPU) fv(op string, b Buffer, n int) []float32 {
	a, ok := d.check(op, b, F32, n, false)
	if !ok {
		return nil
	}
	return a.f[b.off : b.off+b.n : b.off+b.n]
}

// fvAny is fv for a buffer of any length.
func (d *CPU) fvAny(op string, b Buffer) []float32 {
	a, ok := d.check(op, b, F32, 0, true)
	if !ok {
		return nil
	}
	return a.f[b.off : b.off+b.n : b.off+b.n]
}

// iv returns b's int32 slice of n elements, or nil after recording an error.
func (d *CPU) iv(op string, b Buffer, n int) []int32 {
	a, ok := d.check(op, b, I32, n, false)
	if !ok {
		return nil
	}
	return a.i[b.off : b.off+b.n : b.off+b.n]
}

// Float32s exposes a CPU buffer's memory (tests, zero-copy host access).
func (d *CPU) Float32s(b Buffer) ([]float32, error) {
	if v := d.fvAny("float32s", b); v != nil {
		return v, nil
	}
	return nil, d.Sync()
}

// CopyIn copies host data into dst.
func (d *CPU) CopyIn(dst Buffer, src []float32) error {
	v := d.fv("copyin", dst, len(src))
	if v == nil {
		return d.Sync()
	}
	copy(v, src)
	return nil
}

// CopyInInt32 copies host int32 data into an I32 buffer.
func (d *CPU) CopyInInt32(dst Buffer, src []int32) error {
	v := d.iv("copyin", dst, len(src))
	if v == nil {
		return d.Sync()
	}
	copy(v, src)
	return nil
}

// CopyOut copies src to host memory, reporting any sticky error first.
func (d *CPU) CopyOut(dst []float32, src Buffer) error {
	if err := d.Sync(); err != nil {
		return err
	}
	v := d.fv("copyout", src, len(dst))
	if v == nil {
		return d.Sync()
	}
	copy(dst, v)
	return nil
}

// Copy copies src to dst on this device.
func (d *CPU) Copy(dst, src Buffer) {
	s := d.fvAny("copy", src)
	t := d.fv("copy", dst, len(s))
	if s == nil || t == nil {
		return
	}
	copy(t, s)
}
