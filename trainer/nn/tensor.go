package nn

import (
	"fmt"

	"github.com/loaderd/loaderd/trainer/tensor"
)

// Shape is the per-sample shape C×H×W of an activation.
type Shape struct{ C, H, W int }

// Size returns C·H·W.
func (s Shape) Size() int { return s.C * s.H * s.W }

func (s Shape) String() string { return fmt.Sprintf("%d×%d×%d", s.C, s.H, s.W) }

// Tensor is a batch of N activations of one Shape, NCHW, in Buf.
type Tensor struct {
	Buf tensor.Buffer
	N   int
	Shape
}

// Len returns N·C·H·W.
func (t Tensor) Len() int { return t.N * t.Size() }

// Ctx is what modules see of their model: the device, the mode and a
// scratch workspace shared by all layers (they run one at a time).
type Ctx struct {
	Dev   tensor.Device
	Train bool
	// Precision, when not F32Exact, rounds the outputs and input gradients
	// of the layers a GPU's autocast runs in half precision (linear,
	// convolution, batch norm, pooling means) and the loss gradient, as
	// their half-precision tensors would hold them; the arithmetic stays
	// f32 (the accumulation a tensor core does).
	Precision tensor.Precision
	ws        scratch
}

// half rounds b to the context's precision, if any.
func (c *Ctx) half(b tensor.Buffer) {
	if c.Precision != tensor.F32Exact && b.Valid() {
		c.Dev.Round(b, c.Precision)
	}
}

// Workspace returns n floats of scratch, valid until the next call.
func (c *Ctx) Workspace(n int) (tensor.Buffer, error) { return c.ws.get(c.Dev, tensor.F32, n) }

// scratch is a device buffer that grows to the largest size asked for, so
// steady-state batches allocate nothing.
type scratch struct{ b tensor.Buffer }

func (s *scratch) get(dev tensor.Device, t tensor.DType, n int) (tensor.Buffer, error) {
	if n <= 0 {
		return tensor.Buffer{}, fmt.Errorf("nn: scratch of %d elements: %w", n, ErrShape)
	}
	if !s.b.Valid() || s.b.Len() < n || s.b.DType() != t {
		if s.b.Valid() {
			if err := dev.Free(s.b); err != nil {
				return tensor.Buffer{}, fmt.Errorf("nn: %w", err)
			}
		}
		b, err := dev.Alloc(t, n)
		if err != nil {
			return tensor.Buffer{}, fmt.Errorf("nn: %w", err)
		}
		s.b = b
	}
	return s.b.Slice(0, n), nil
}

// out returns an activation tensor of n samples of shape sh from s.
func (s *scratch) out(c *Ctx, n int, sh Shape) (Tensor, error) {
	b, err := s.get(c.Dev, tensor.F32, n*sh.Size())
	return Tensor{Buf: b, N: n, Shape: sh}, err
}

// checkIn validates an input tensor against the shape a layer was built for.
func checkIn(layer string, x Tensor, want Shape) error {
	if x.N <= 0 || x.Shape != want || x.Buf.Len() != x.Len() {
		return shapeErr(layer, "input %d×%v in %d elements, want N×%v", x.N, x.Shape, x.Buf.Len(), want)
	}
	return nil
}
