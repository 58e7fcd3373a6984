package tensor

// Transpose selects op(X) = X or Xᵀ in Gemm.
type Transpose bool

const (
	NoTrans Transpose = false
	Trans   Transpose = true
)

// ScratchSizer is implemented by devices that want layers to lower more
// (or less) at once than the host's default, which keeps a conv's im2col
// scratch in a CPU's cache. A GPU wants the opposite: few launches over
// many images, since each launch and each small GEMM has a fixed cost.
type ScratchSizer interface {
	// ScratchFloats is how many f32 elements of scratch a layer may use
	// for one chunk of a batch.
	ScratchFloats() int
}

// Device is one ordered stream of work on one accelerator (or a goroutine
// budget on the host). All matrices are row-major; all activations NCHW.
// Kernels return nothing: see the package comment for the error model.
type Device interface {
	Name() string
	// Alloc returns a zeroed allocation of n elements.
	Alloc(t DType, n int) (Buffer, error)
	// Free releases the allocation b views once queued work is done; b and
	// every other view of it become invalid. Close frees everything.
	Free(b Buffer) error
	// CopyIn copies host → device; len(src) must equal dst.Len().
	CopyIn(dst Buffer, src []float32) error
	CopyInInt32(dst Buffer, src []int32) error
	// CopyOut synchronises and copies device → host.
	CopyOut(dst []float32, src Buffer) error
	// Sync waits for queued work and returns (and clears) the first sticky
	// error since the last Sync.
	Sync() error
	// Err returns the sticky error without waiting or clearing it.
	Err() error
	// Close releases the device's workers and memory; later use fails.
	Close() error

	// Copy copies src to dst on this device (equal lengths).
	Copy(dst, src Buffer)
	// Gemm computes C = alpha·op(A)·op(B) + beta·C with op(A) m×k, op(B)
	// k×n and leading dimensions lda, ldb, ldc. With beta == 0, C is not read.
	Gemm(ta, tb Transpose, m, n, k int, alpha float32, a Buffer, lda int,
		b Buffer, ldb int, beta float32, c Buffer, ldc int)

	Fill(x Buffer, v float32)
	Scale(x Buffer, alpha float32)
	// Axpy computes y += alpha·x.
	Axpy(alpha float32, x, y Buffer)
	// Add computes dst = a + b (dst may alias a or b).
	Add(dst, a, b Buffer)
	// DivScalar computes dst = src / d[0] with d a one-element buffer, so a
	// count that lives on the device (after an all-reduce) divides in place.
	DivScalar(dst, src, d Buffer)
	ReLU(y, x Buffer)
	// ReLUBackward computes dx = dy where y > 0, else 0.
	ReLUBackward(dx, dy, y Buffer)

	// Tensors viewed as [outer][c][inner]: bias per c, sums per c.
	AddBias(x, bias Buffer, outer, c, inner int)
	// ChannelSum sets dst[j] = Σ_{o,i} x[o][j][i] (bias gradient, BN sums).
	ChannelSum(dst, x Buffer, outer, c, inner int)
	// ChannelSqDev sets dst[j] = Σ_{o,i} (x[o][j][i] − mean[j])².
	ChannelSqDev(dst, x, mean Buffer, outer, c, inner int)
	// RowSum sets dst[r] = alpha·Σ_j x[r][j] for an rows×cols matrix.
	RowSum(dst, x Buffer, rows, cols int, alpha float32)
	// RowBroadcast sets dst[r][j] = alpha·x[r].
	RowBroadcast(dst, x Buffer, rows, cols int, alpha float32)
	// Transpose12 permutes [a][b][inner] to [b][a][inner].
	Transpose12(dst, src Buffer, a, b, inner int)

	// Im2Col lays n NCHW images out as col[(c·KH+ky)·KW+kx][img·OH·OW+oy·OW+ox].
	Im2Col(col, x Buffer, g ConvGeom, n int)
	// Col2Im is the adjoint of Im2Col: dx = Σ of col entries (overwrites dx).
	Col2Im(dx, col Buffer, g ConvGeom, n int)
	// MaxPool writes y and the flat input index (within its plane) of each max.
	MaxPool(y, idx, x Buffer, g PoolGeom, n int)
	MaxPoolBackward(dx, dy, idx Buffer, g PoolGeom, n int)

	// BNInvStd sets invstd = 1/sqrt(v + eps).
	BNInvStd(invstd, v Buffer, eps float32)
	// BNRunning updates running stats PyTorch's way from batch mean and
	// biased var over count cnt[0] elements: r = (1−m)·r + m·batch, with
	// the variance made unbiased by cnt/(cnt−1).
	BNRunning(rmean, rvar, mean, v, cnt Buffer, momentum float32)
	// BNForward sets y = gamma·(x − mean)·invstd + beta per channel (NCHW).
	BNForward(y, x, mean, invstd, gamma, beta Buffer, n, c, hw int)
	// BNGradSums sets sdy[j] = Σ dy and sdyx[j] = Σ dy·x̂ per channel.
	BNGradSums(sdy, sdyx, dy, x, mean, invstd Buffer, n, c, hw int)
	// BNBackward sets dx = gamma·invstd·(dy − sdy/M − x̂·sdyx/M), M = cnt[0].
	BNBackward(dx, dy, x, mean, invstd, gamma, sdy, sdyx, cnt Buffer, n, c, hw int)

	// SoftmaxCE computes row-wise softmax of n×c logits into prob and the
	// per-row cross-entropy against labels (I32) smoothed by eps into loss.
	SoftmaxCE(loss, prob, logits, labels Buffer, n, c int, eps float32)
	// SoftmaxCEBackward sets dlogits = scale·(prob − q), q the smoothed target.
	SoftmaxCEBackward(dlogits, prob, labels Buffer, n, c int, eps, scale float32)
	// CountCorrect sets dst[0] = number of rows whose arg-max equals the label.
	CountCorrect(dst, logits, labels Buffer, n, c int)
	// SGD applies one PyTorch torch.optim.SGD update to p using g and buf.
	SGD(p, g, buf Buffer, a SGDArgs)

	// Round rounds x in place to precision p and back (ties to even), as
	// a half-precision copy would hold it: mixed-precision emulation.
	Round(x Buffer, p Precision)
	// NonFinite sets dst[0] = 1 when any element of x is ±Inf or NaN, else
	// 0 (a loss scaler's check of the gradients before a step).
	NonFinite(dst, x Buffer)
}

// Convolver is implemented by devices with a convolution library (cuDNN on
// a GPU): while Convolutions reports true, Conv2d runs each pass as one
// call over the whole batch instead of im2col and GEMMs. Layouts are
// Im2Col's: x is n×C×H×W, w is cout×C×KH×KW, y is n×cout×OH×OW, all NCHW.
// Kernels return nothing, as Device's do.
type Convolver interface {
	Convolutions() bool
	// ConvForward sets y = x ⋆ w (cross-correlation, as deep learning means
	// convolution).
	ConvForward(y, x, w Buffer, g ConvGeom, cout, n int)
	// ConvBackwardData sets dx to the gradient of x (overwrites dx).
	ConvBackwardData(dx, dy, w Buffer, g ConvGeom, cout, n int)
	// ConvBackwardFilter sets dw = beta·dw + the gradient of w over the batch.
	ConvBackwardFilter(dw, x, dy Buffer, g ConvGeom, cout, n int, beta float32)
}

// SGDArgs are the hyper-parameters of one SGD update, with PyTorch meaning.
// First marks the first step, on which the momentum buffer is set to the
// gradient (no dampening), as torch.optim.SGD does.
type SGDArgs struct {
	LR, Momentum, Dampening, WeightDecay float32
	Nesterov, First                      bool
}

// ConvGeom is the geometry of a 2-D convolution (per image).
type ConvGeom struct {
	C, H, W     int // input channels and size
	KH, KW      int
	Stride, Pad int
	OH, OW      int // output size, set by NewConvGeom
}

// NewConvGeom fills the output size and validates the geometry.
func NewConvGeom(c, h, w, kh, kw, stride, pad int) (ConvGeom, error) {
	g := ConvGeom{C: c, H: h, W: w, KH: kh, KW: kw, Stride: stride, Pad: pad}
	if c <= 0 || h <= 0 || w <= 0 || kh <= 0 || kw <= 0 || stride <= 0 || pad < 0 {
		return g, argErr("conv", "invalid geometry %+v", g)
	}
	g.OH = (h+2*pad-kh)/stride + 1
	g.OW = (w+2*pad-kw)/stride + 1
	if g.OH <= 0 || g.OW <= 0 {
		return g, argErr("conv", "kernel larger than padded input %+v", g)
	}
	return g, nil
}

// valid reports whether g is what NewConvGeom would have built.
func (g ConvGeom) valid() bool {
	h, err := NewConvGeom(g.C, g.H, g.W, g.KH, g.KW, g.Stride, g.Pad)
	return err == nil && h == g
}

// K returns the rows of the im2col matrix, C·KH·KW.
func (g ConvGeom) K() int { return g.C * g.KH * g.KW }

// P returns the output pixels per image, OH·OW.
func (g ConvGeom) P() int { return g.OH * g.OW }

// PoolGeom is the geometry of a max-pool over C planes (no padding).
type PoolGeom struct {
	C, H, W, K, Stride int
	OH, OW             int // set by NewPoolGeom
}

// NewPoolGeom fills the output size and validates the geometry.
func NewPoolGeom(c, h, w, k, stride int) (PoolGeom, error) {
	g := PoolGeom{C: c, H: h, W: w, K: k, Stride: stride}
	if c <= 0 || h < k || w < k || k <= 0 || stride <= 0 {
		return g, argErr("maxpool", "invalid geometry %+v", g)
	}
	g.OH = (h-k)/stride + 1
	g.OW = (w-k)/stride + 1
	return g, nil
}

func (g PoolGeom) valid() bool {
	h, err := NewPoolGeom(g.C, g.H, g.W, g.K, g.Stride)
	return err == nil && h == g
}
