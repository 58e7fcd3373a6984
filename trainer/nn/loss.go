package nn

import (
	"fmt"

	"github.com/loaderd/loaderd/trainer/tensor"
)

// SoftmaxCrossEntropy is the mean over the batch of −Σ_j q_j·log softmax(x)_j
// with q = (1−Smoothing)·onehot(label) + Smoothing/C, PyTorch's
// cross_entropy(label_smoothing=…).
type SoftmaxCrossEntropy struct {
	Smoothing float32

	n, c        int
	labels      tensor.Buffer
	prob, loss  scratch
	stats, dlog scratch
}

// NewSoftmaxCrossEntropy returns the loss with the given label smoothing.
func NewSoftmaxCrossEntropy(smoothing float32) *SoftmaxCrossEntropy {
	return &SoftmaxCrossEntropy{Smoothing: smoothing}
}

// Forward returns a two-element device buffer: the mean loss over the N
// rows and the number of rows whose arg-max equals the label. labels is
// an I32 buffer of N class indices; it must stay unchanged until Backward.
func (l *SoftmaxCrossEntropy) Forward(c *Ctx, logits Tensor, labels tensor.Buffer) (tensor.Buffer, error) {
	n, k := logits.N, logits.Size()
	if n <= 0 || logits.Buf.Len() != n*k || labels.Len() != n || labels.DType() != tensor.I32 {
		return tensor.Buffer{}, shapeErr("cross_entropy", "logits %d×%v, %d labels", n, logits.Shape, labels.Len())
	}
	if l.Smoothing < 0 || l.Smoothing > 1 {
		return tensor.Buffer{}, fmt.Errorf("nn: cross_entropy: smoothing %g outside [0, 1]: %w", l.Smoothing, tensor.ErrArg)
	}
	d := c.Dev
	prob, err := l.prob.get(d, tensor.F32, n*k)
	if err != nil {
		return tensor.Buffer{}, err
	}
	loss, err := l.loss.get(d, tensor.F32, n)
	if err != nil {
		return tensor.Buffer{}, err
	}
	st, err := l.stats.get(d, tensor.F32, 2)
	if err != nil {
		return tensor.Buffer{}, err
	}
	d.SoftmaxCE(loss, prob, logits.Buf, labels, n, k, l.Smoothing)
	d.RowSum(st.Slice(0, 1), loss, 1, n, 1/float32(n))
	d.CountCorrect(st.Slice(1, 1), logits.Buf, labels, n, k)
	l.n, l.c, l.labels = n, k, labels
	return st, d.Err()
}

// Backward returns dlogits = scale·(softmax − q). scale = 1/N gives the
// gradient of the mean loss; data-parallel callers pass 1/N_global.
func (l *SoftmaxCrossEntropy) Backward(c *Ctx, scale float32) (Tensor, error) {
	if l.n == 0 {
		return Tensor{}, fmt.Errorf("nn: cross_entropy backward before forward: %w", ErrState)
	}
	dl, err := l.dlog.out(c, l.n, Shape{l.c, 1, 1})
	if err != nil {
		return Tensor{}, err
	}
	c.Dev.SoftmaxCEBackward(dl.Buf, l.prob.b.Slice(0, l.n*l.c), l.labels, l.n, l.c, l.Smoothing, scale)
	c.half(dl.Buf) // the (scaled) loss gradient enters the half-precision graph
	return dl, c.Dev.Err()
}
