package nn

import (
	"fmt"

	"github.com/loaderd/loaderd/trainer/tensor"
)

// StatSync sums a device buffer across the replicas of a data-parallel
// group, in place; every replica calls it in the same order. SyncBN uses it
// to normalise with statistics of the global batch.
type StatSync interface {
	AllReduceSum(b tensor.Buffer) error
}

// BatchNorm2d normalises each channel over N, H and W with PyTorch's
// semantics: training uses the biased batch variance and updates running
// statistics r = (1−Momentum)·r + Momentum·batch (unbiased variance); eval
// uses the running statistics. With Sync set, the batch statistics and the
// backward sums are those of the global batch across replicas (SyncBN), so
// K replicas compute what one device computes on the whole batch; the
// gradients of gamma and beta stay local sums for the gradient reduction.
type BatchNorm2d struct {
	C             int
	Momentum, Eps float32
	Sync          StatSync

	gamma, beta, rmean, rvar Param
	in                       Shape
	x                        Tensor
	trained                  bool // the last Forward used batch statistics
	small                    scratch
	y, dx                    scratch
}

// NewBatchNorm2d returns a BatchNorm2d with PyTorch defaults (momentum 0.1,
// eps 1e-5, gamma 1, beta 0).
func NewBatchNorm2d(c int) *BatchNorm2d {
	return &BatchNorm2d{C: c, Momentum: 0.1, Eps: 1e-5,
		gamma: Param{Name: "weight", Shape: []int{c}, Init: InitOne},
		beta:  Param{Name: "bias", Shape: []int{c}, Init: InitZero},
		rmean: Param{Name: "running_mean", Shape: []int{c}, Init: InitZero, State: true},
		rvar:  Param{Name: "running_var", Shape: []int{c}, Init: InitOne, State: true}}
}

func (b *BatchNorm2d) Params() []*Param {
	return []*Param{&b.gamma, &b.beta, &b.rmean, &b.rvar}
}

func (b *BatchNorm2d) Init(in Shape) (Shape, error) {
	if in.C != b.C || b.C <= 0 {
		return Shape{}, shapeErr("batchnorm", "input %v, want %d channels", in, b.C)
	}
	b.in = in
	return in, nil
}

// views of the small per-layer buffer: sums+count, sq, mean, var, invstd,
// gradient sums (2C) and zeros (2C) for eval-mode backward.
func (b *BatchNorm2d) views(c *Ctx) (st, sq, mean, vr, inv, gs, zero tensor.Buffer, err error) {
	C := b.C
	fresh := !b.small.b.Valid()
	s, err := b.small.get(c.Dev, tensor.F32, 9*C+1)
	if err != nil {
		return
	}
	if fresh {
		c.Dev.Fill(s, 0)
	}
	return s.Slice(0, C+1), s.Slice(C+1, C), s.Slice(2*C+1, C), s.Slice(3*C+1, C),
		s.Slice(4*C+1, C), s.Slice(5*C+1, 2*C), s.Slice(7*C+1, 2*C), nil
}

func (b *BatchNorm2d) Forward(c *Ctx, x Tensor) (Tensor, error) {
	if err := checkIn("batchnorm", x, b.in); err != nil {
		return Tensor{}, err
	}
	hw, C := b.in.H*b.in.W, b.C
	if c.Train && b.Sync == nil && x.N*hw < 2 {
		return Tensor{}, shapeErr("batchnorm", "training needs more than one value per channel")
	}
	st, sq, mean, vr, inv, _, _, err := b.views(c)
	if err != nil {
		return Tensor{}, err
	}
	y, err := b.y.out(c, x.N, b.in)
	if err != nil {
		return Tensor{}, err
	}
	d := c.Dev
	if !c.Train {
		d.BNInvStd(inv, b.rvar.W, b.Eps)
		d.BNForward(y.Buf, x.Buf, b.rmean.W, inv, b.gamma.W, b.beta.W, x.N, C, hw)
		c.half(y.Buf)
		b.x, b.trained = x, false
		return y, d.Err()
	}
	cnt := st.Slice(C, 1)
	d.ChannelSum(st.Slice(0, C), x.Buf, x.N, C, hw)
	d.Fill(cnt, float32(x.N*hw))
	if err := b.allReduce(st); err != nil {
		return Tensor{}, err
	}
	d.DivScalar(mean, st.Slice(0, C), cnt)
	d.ChannelSqDev(sq, x.Buf, mean, x.N, C, hw)
	if err := b.allReduce(sq); err != nil {
		return Tensor{}, err
	}
	d.DivScalar(vr, sq, cnt)
	d.BNInvStd(inv, vr, b.Eps)
	d.BNRunning(b.rmean.W, b.rvar.W, mean, vr, cnt, b.Momentum)
	d.BNForward(y.Buf, x.Buf, mean, inv, b.gamma.W, b.beta.W, x.N, C, hw)
	c.half(y.Buf)
	b.x, b.trained = x, true
	return y, d.Err()
}

func (b *BatchNorm2d) allReduce(buf tensor.Buffer) error {
	if b.Sync == nil {
		return nil
	}
	if err := b.Sync.AllReduceSum(buf); err != nil {
		return fmt.Errorf("nn: syncbn: %w", err)
	}
	return nil
}

func (b *BatchNorm2d) Backward(c *Ctx, dy Tensor, needDx bool) (Tensor, error) {
	if dy.N != b.x.N || dy.Shape != b.in {
		return Tensor{}, backErr("batchnorm", dy, b.x.N)
	}
	hw, C := b.in.H*b.in.W, b.C
	st, _, mean, _, inv, gs, zero, err := b.views(c)
	if err != nil {
		return Tensor{}, err
	}
	d := c.Dev
	if !b.trained {
		mean = b.rmean.W // inv still holds the running invstd from Forward
	}
	sdy, sdyx := gs.Slice(0, C), gs.Slice(C, C)
	d.BNGradSums(sdy, sdyx, dy.Buf, b.x.Buf, mean, inv, dy.N, C, hw)
	d.Copy(b.beta.G, sdy)
	d.Copy(b.gamma.G, sdyx)
	if b.trained {
		if err := b.allReduce(gs); err != nil {
			return Tensor{}, err
		}
	} else {
		// Eval mode: statistics are constants, so dx = gamma·invstd·dy.
		sdy, sdyx = zero.Slice(0, C), zero.Slice(C, C)
		d.Fill(st.Slice(C, 1), 1)
	}
	if !needDx {
		return Tensor{}, d.Err()
	}
	dx, err := b.dx.out(c, dy.N, b.in)
	if err != nil {
		return Tensor{}, err
	}
	d.BNBackward(dx.Buf, dy.Buf, b.x.Buf, mean, inv, b.gamma.W, sdy, sdyx, st.Slice(C, 1), dy.N, C, hw)
	c.half(dx.Buf)
	return dx, d.Err()
}
