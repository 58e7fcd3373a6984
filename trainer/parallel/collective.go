package parallel

import (
	"errors"
	"fmt"
	"sync"

	"github.com/loaderd/loaderd/trainer/tensor"
)

// Op is a reduction operator.
type Op uint8

const (
	Sum Op = iota
	Avg
)

var (
	// ErrAborted reports a collective cut short because a rank failed.
	ErrAborted = errors.New("parallel: group aborted")
	// ErrMismatch reports ranks calling a collective with different sizes.
	ErrMismatch = errors.New("parallel: ranks disagree")
	// ErrConfig reports invalid arguments to a constructor or step.
	ErrConfig = errors.New("parallel: invalid configuration")
)

// Collective is one rank's handle on a group of Size ranks, each with a
// device. Every call is collective: all ranks make it, concurrently, in the
// same order, with buffers of equal length. All ranks end with bit-identical
// results. An NCCL communicator (one per device) fits this interface.
type Collective interface {
	Rank() int
	Size() int
	// AllReduce replaces b on every rank by the reduction over ranks.
	AllReduce(b tensor.Buffer, op Op) error
	// Reduce leaves the reduction in root's b; other ranks' b is unchanged.
	Reduce(b tensor.Buffer, op Op, root int) error
	// Broadcast copies root's b to every rank's b.
	Broadcast(b tensor.Buffer, root int) error
	// Abort fails the group: pending and later collectives return ErrAborted.
	Abort(cause error)
}

// hostGroup runs collectives through host memory: each rank copies its
// buffer out, rank r reduces chunk r of the result summing ranks in order
// 0…K−1 (deterministic, so every rank gets the same bits), and each rank
// copies the result back: reduce-scatter then all-gather, over shared memory.
type hostGroup struct {
	k       int
	mu      sync.Mutex
	cond    *sync.Cond
	arrived int
	gen     uint64
	err     error
	stage   [][]float32
	res     []float32
	lens    []int
}

type hostComm struct {
	g    *hostGroup
	rank int
	dev  tensor.Device
}

// NewHostGroup returns one Collective per device, communicating through
// host memory with CopyOut/CopyIn (so any Device works).
func NewHostGroup(devs []tensor.Device) ([]Collective, error) {
	if len(devs) == 0 {
		return nil, fmt.Errorf("parallel: no devices: %w", ErrConfig)
	}
	g := &hostGroup{k: len(devs), stage: make([][]float32, len(devs)), lens: make([]int, len(devs))}
	g.cond = sync.NewCond(&g.mu)
	cs := make([]Collective, len(devs))
	for i, d := range devs {
		if d == nil {
			return nil, fmt.Errorf("parallel: device %d is nil: %w", i, ErrConfig)
		}
		cs[i] = &hostComm{g: g, rank: i, dev: d}
	}
	return cs, nil
}

func (c *hostComm) Rank() int         { return c.rank }
func (c *hostComm) Size() int         { return c.g.k }
func (c *hostComm) Abort(cause error) { c.g.abort(cause) }

func (g *hostGroup) abort(cause error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err == nil {
		g.err = fmt.Errorf("%w: %w", ErrAborted, cause)
	}
	g.cond.Broadcast()
}

func (g *hostGroup) barrier() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err != nil {
		return g.err
	}
	gen := g.gen
	if g.arrived++; g.arrived == g.k {
		g.arrived = 0
		g.gen++
		g.cond.Broadcast()
		return nil
	}
	for gen == g.gen && g.err == nil {
		g.cond.Wait()
	}
	if gen == g.gen {
		return g.err
	}
	return nil
}

// enter stages this rank's buffer (when stage is set) and checks that all
// ranks agree on its length.
func (c *hostComm) enter(b tensor.Buffer, stage bool) (int, error) {
	g, n := c.g, b.Len()
	if b.Device() != c.dev || b.DType() != tensor.F32 {
		err := fmt.Errorf("parallel: rank %d: buffer not an f32 buffer of its device: %w", c.rank, ErrConfig)
		g.abort(err)
		return 0, err
	}
	if stage {
		if cap(g.stage[c.rank]) < n {
			g.stage[c.rank] = make([]float32, n)
		}
		if err := c.dev.CopyOut(g.stage[c.rank][:n], b); err != nil {
			g.abort(err)
			return 0, err
		}
	}
	g.lens[c.rank] = n
	if c.rank == 0 && cap(g.res) < n {
		g.res = make([]float32, n) // nobody reads res until the barrier
	}
	if err := g.barrier(); err != nil {
		return 0, err
	}
	for r, l := range g.lens {
		if l != n {
			return 0, fmt.Errorf("parallel: rank %d has %d elements, rank %d has %d: %w", c.rank, n, r, l, ErrMismatch)
		}
	}
	return n, nil
}

// reduceChunk sums chunk rank of every stage into res.
func (c *hostComm) reduceChunk(n int, op Op) {
	g := c.g
	lo, hi := n*c.rank/g.k, n*(c.rank+1)/g.k
	res := g.res[lo:hi]
	copy(res, g.stage[0][lo:hi])
	for k := 1; k < g.k; k++ {
		for i, v := range g.stage[k][lo:hi] {
			res[i] += v
		}
	}
	if op == Avg {
		inv := 1 / float32(g.k)
		for i := range res {
			res[i] *= inv
		}
	}
}

func (c *hostComm) copyBack(b tensor.Buffer, n int) error {
	if err := c.dev.CopyIn(b, c.g.res[:n]); err != nil {
		c.g.abort(err)
		return err
	}
	if err := c.dev.Sync(); err != nil { // the copy must land before res is reused
		c.g.abort(err)
		return err
	}
	return nil
}

func (c *hostComm) AllReduce(b tensor.Buffer, op Op) error { return c.reduce(b, op, -1) }

func (c *hostComm) Reduce(b tensor.Buffer, op Op, root int) error {
	if root < 0 || root >= c.g.k {
		return fmt.Errorf("parallel: root %d of %d ranks: %w", root, c.g.k, ErrConfig)
	}
	return c.reduce(b, op, root)
}

// reduce implements AllReduce (root < 0) and Reduce.
func (c *hostComm) reduce(b tensor.Buffer, op Op, root int) error {
	if c.g.k == 1 {
		return c.dev.Err()
	}
	n, err := c.enter(b, true)
	if err != nil {
		return err
	}
	c.reduceChunk(n, op)
	if err := c.g.barrier(); err != nil {
		return err
	}
	if root < 0 || root == c.rank {
		if err := c.copyBack(b, n); err != nil {
			return err
		}
	}
	return c.g.barrier()
}

func (c *hostComm) Broadcast(b tensor.Buffer, root int) error {
	if root < 0 || root >= c.g.k {
		return fmt.Errorf("parallel: root %d of %d ranks: %w", root, c.g.k, ErrConfig)
	}
	if c.g.k == 1 {
		return c.dev.Err()
	}
	n, err := c.enter(b, false)
	if err != nil {
		return err
	}
	if c.rank == root {
		if err := c.dev.CopyOut(c.g.res[:n], b); err != nil {
			c.g.abort(err)
			return err
		}
	}
	if err := c.g.barrier(); err != nil {
		return err
	}
	if c.rank != root {
		if err := c.copyBack(b, n); err != nil {
			return err
		}
	}
	return c.g.barrier()
}
