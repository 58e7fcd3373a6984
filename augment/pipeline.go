package augment

import (
	"fmt"
	"unsafe"

	"github.com/loaderd/loaderd/client/sample"
)

// Op is one declared step of a pipeline. OutSpec folds the op's effect on
// the image description; ops never see pixels directly — the pipeline fuses
// them into one kernel. The ops of this package are the ones NewPipeline can
// fuse; String gives an op's ParseOps form.
type Op interface {
	OutSpec(in Spec) (Spec, error)
	String() string
}

// Pipeline is a folded, fused chain of ops. It is immutable after
// NewPipeline and safe for concurrent use.
type Pipeline struct {
	in, out Spec
	ops     []Op // canonical copies, in declared order

	crop            bool
	pad             int
	maxTop, maxLeft int32
	flip            bool
	flipP           float64
	flipFirst       bool // a flip precedes the crop

	// Per-channel tables from a pixel value to the output element's bits
	// (little-endian in memory whatever the host), and the mapped fill.
	// Only the one of the output's size is built.
	sized *sized      // a chain opening with geometric ops; nil for the others
	photo *photoStage // a chain with photometric ops or random_erasing; nil for the others
	mix   *Mixer      // the batch ops (mixup, cutmix) that end the chain; nil without

	lut8   *[3][256]uint8
	lut16  *[3][256]uint16
	lut32  *[3][256]uint32
	fill8  [3]uint8
	fill16 [3]uint16
	fill32 [3]uint32
}

// maxSide bounds image sides and padding, so that crop offsets fit Params'
// int32 and sizes cannot overflow.
const maxSide = 1 << 20

// NewPipeline folds ops over in (a U8 image spec) once, checks the chain and
// builds the kernel's lookup tables. Errors wrap ErrInvalidSpec or
// ErrInvalidOp (an *OpError naming the op).
//
// A chain may open with geometric ops (resize, center_crop or
// random_resized_crop); then in must be U8 HWC and may have H = W = 0, an
// image of any size (see ApplySized).
//
// A chain may end with batch ops (mixup, cutmix): they act on whole
// batches, which a Pipeline never sees, so they leave Apply alone and are
// folded into Mixer for whoever assembles the batches.
func NewPipeline(in Spec, ops ...Op) (*Pipeline, error) {
	per, batch, err := splitBatchOps(ops)
	if err != nil {
		return nil, err
	}
	p, err := newSampleChain(in, per...)
	if err != nil || len(batch) == 0 {
		return p, err
	}
	return p.withMix(batch, len(per))
}

// newSampleChain is NewPipeline of a chain of per-sample ops.
func newSampleChain(in Spec, ops ...Op) (*Pipeline, error) {
	n := 0
	for n < len(ops) && isGeo(ops[n]) {
		n++
	}
	for i := n; i < len(ops); i++ {
		if isGeo(ops[i]) {
			return nil, &OpError{Index: i, Op: geoValue(ops[i]), Err: errText("resize and crop ops that take any size must open the chain")}
		}
	}
	if n > 0 {
		return newSized(in, ops, n)
	}
	if err := in.Validate(); err != nil {
		return nil, kindError{err, ErrInvalidSpec}
	}
	if in.DType != sample.U8 {
		return nil, errorf(ErrInvalidSpec, "augment: input %v must be u8", in)
	}
	if in.H > maxSide || in.W > maxSide {
		return nil, errorf(ErrInvalidSpec, "augment: input %v is larger than %d on a side", in, maxSide)
	}
	if hasStages(ops) {
		return newStaged(in, ops)
	}
	p := &Pipeline{in: in, out: in}
	var fill [3]uint8
	var vals []Op // value ops in order, for the tables
	for i, op := range ops {
		op, err := canon(op)
		if err == nil {
			p.out, err = op.OutSpec(p.out)
		}
		if err != nil {
			return nil, &OpError{Index: i, Op: op, Err: err}
		}
		switch o := op.(type) {
		case RandomCrop:
			if p.crop {
				return nil, &OpError{Index: i, Op: op, Err: errText("only one crop per pipeline")}
			}
			p.crop, p.pad = true, o.Padding
			p.maxTop = int32(in.H + 2*o.Padding - o.Size)
			p.maxLeft = int32(in.W + 2*o.Padding - o.Size)
			p.flipFirst = p.flip
			for c := range in.C {
				fill[c] = o.fillFor(c)
			}
		case RandomHorizontalFlip:
			if p.flip {
				return nil, &OpError{Index: i, Op: op, Err: errText("only one flip per pipeline")}
			}
			p.flip, p.flipP = true, o.P
		case ToTensor, Normalize, Output:
			vals = append(vals, op)
		}
		p.ops = append(p.ops, op)
	}
	if err := p.out.Validate(); err != nil {
		return nil, kindError{err, ErrInvalidSpec}
	}
	p.buildTables(vals, &fill)
	return p, nil
}

// canon turns an op of this package (value or non-nil pointer) into a value
// with private copies of its slices, so callers may reuse theirs. It
// returns a nil Op with its error.
func canon(op Op) (Op, error) {
	switch o := op.(type) {
	case RandomCrop:
		o.Fill = append([]uint8(nil), o.Fill...)
		return o, nil
	case Normalize:
		o.Mean = append([]float32(nil), o.Mean...)
		o.Std = append([]float32(nil), o.Std...)
		return o, nil
	case RandomHorizontalFlip, ToTensor, Output, MixUp, CutMix:
		return o, nil
	case *MixUp:
		if o != nil {
			return *o, nil
		}
	case *CutMix:
		if o != nil {
			return *o, nil
		}
	case ColorJitter, Grayscale, RandomGrayscale, GaussianBlur, AutoAugment, RandAugment, TrivialAugmentWide, RandomErasing:
		return canonPhoto(op), nil
	case *ColorJitter:
		if o != nil {
			return canonPhoto(*o), nil
		}
	case *Grayscale:
		if o != nil {
			return canonPhoto(*o), nil
		}
	case *RandomGrayscale:
		if o != nil {
			return canonPhoto(*o), nil
		}
	case *GaussianBlur:
		if o != nil {
			return canonPhoto(*o), nil
		}
	case *AutoAugment:
		if o != nil {
			return canonPhoto(*o), nil
		}
	case *RandAugment:
		if o != nil {
			return canonPhoto(*o), nil
		}
	case *TrivialAugmentWide:
		if o != nil {
			return canonPhoto(*o), nil
		}
	case *RandomErasing:
		if o != nil {
			return canonPhoto(*o), nil
		}
	case *RandomCrop:
		if o != nil {
			return canon(*o)
		}
	case *Normalize:
		if o != nil {
			return canon(*o)
		}
	case *RandomHorizontalFlip:
		if o != nil {
			return *o, nil
		}
	case *ToTensor:
		if o != nil {
			return *o, nil
		}
	case *Output:
		if o != nil {
			return *o, nil
		}
	case nil:
	default:
		return nil, fmt.Errorf("%T cannot be fused (only this package's ops can)", op)
	}
	return nil, errText("nil op")
}

// In returns the input spec.
func (p *Pipeline) In() Spec { return p.in }

// Out returns the output spec.
func (p *Pipeline) Out() Spec { return p.out }

// Ops returns a copy of the pipeline's ops in declared order.
func (p *Pipeline) Ops() []Op { return append([]Op(nil), p.ops...) }

// String returns the ops in ParseOps form.
func (p *Pipeline) String() string { return FormatOps(p.ops) }

// Draw returns the random parameters for dataset index `index` of `epoch`:
// a pure function of (seed, epoch, index), the same on any goroutine and any
// run. Top and Left are uniform over the valid crop corners (0 without a
// crop); Flip is true with the flip's probability (false without a flip).
//
// For a chain opening with geometric ops Draw is DrawSized at In()'s size;
// on a variable-size pipeline it leaves Box zero.
func (p *Pipeline) Draw(seed uint64, epoch, index int64) sample.Params {
	if p.sized != nil {
		return p.DrawSized(seed, epoch, index, p.in.H, p.in.W)
	}
	if p.photo != nil {
		prm := p.photo.pre.Draw(seed, epoch, index)
		p.photo.draw(&prm, drawKey(seed, epoch, index))
		return prm
	}
	var prm sample.Params
	key := drawKey(seed, epoch, index)
	if p.crop {
		prm.Top = int32(uniform(key, streamTop, uint64(p.maxTop)+1))
		prm.Left = int32(uniform(key, streamLeft, uint64(p.maxLeft)+1))
	}
	if p.flip {
		prm.Flip = unit(key, streamFlip) < p.flipP
	}
	return prm
}

// geom works out the segments of one call and checks prm.
func (p *Pipeline) geom(prm sample.Params) (geom, error) {
	if prm.Top < 0 || prm.Top > p.maxTop || prm.Left < 0 || prm.Left > p.maxLeft || prm.Flip && !p.flip {
		flip := "no flip"
		if p.flip {
			flip = "flip or not"
		}
		return geom{}, errorf(ErrParams, "augment: params %+v out of range (top 0..%d, left 0..%d, %s)",
			prm, p.maxTop, p.maxLeft, flip)
	}
	in, out := p.in, p.out
	left := int(prm.Left)
	if prm.Flip && p.flipFirst {
		// crop(mirror(X), left) == mirror(crop(X, maxLeft-left)): padding is
		// symmetric, so the window just moves to the mirrored place.
		left = int(p.maxLeft) - left
	}
	oy, ox := int(prm.Top)-p.pad, left-p.pad // source row/col of window (0,0)
	g := geom{c: in.C, ip: in.H * in.W, op: out.H * out.W, w: in.W, ow: out.W,
		flip: prm.Flip, in: in.Layout, out: out.Layout}
	y0, y1 := clamp(-oy, out.H), clamp(in.H-oy, out.H)
	var x0, x1, sx int
	if prm.Flip {
		// Output column x reads source column ox+ow-1-x.
		x0, x1 = clamp(ox+out.W-in.W, out.W), clamp(ox+out.W, out.W)
		sx = ox + out.W - x1
	} else {
		x0, x1 = clamp(-ox, out.W), clamp(in.W-ox, out.W)
		sx = ox + x0
	}
	if y1 > y0 && x1 > x0 { // else the window lies wholly in the padding
		g.rows, g.n = y1-y0, x1-x0
		g.start, g.src = y0*out.W+x0, (oy+y0)*in.W+sx
	}
	return g, nil
}

func clamp(v, hi int) int { return min(max(v, 0), hi) }

// Apply runs the fused kernel: src is one input image (exactly In().Bytes()
// bytes), dst receives the first Out().Bytes() bytes; the rest of dst is
// left alone. Multi-byte elements are written little-endian. The fast path
// stores whole elements through a typed view of dst, which needs dst
// aligned to the element size (any Go allocation of 4 bytes or more, or a
// page-aligned slot at offsets that are multiples of Out().Bytes(), is);
// another dst is written correctly but more slowly. Apply allocates nothing
// and is safe for concurrent use with distinct dst.
func (p *Pipeline) Apply(dst, src []byte, prm sample.Params) error {
	if p.sized != nil {
		return p.applyFixed(dst, src, prm)
	}
	if p.photo != nil {
		return p.photo.applyPooled(p, dst, src, prm)
	}
	if err := p.checkBuffers(dst, src); err != nil {
		return err
	}
	g, err := p.geom(prm)
	if err != nil {
		return err
	}
	n := p.out.Elems()
	aligned := uintptr(unsafe.Pointer(unsafe.SliceData(dst)))%uintptr(p.out.DType.Size()) == 0
	switch p.out.DType.Size() {
	case 1:
		runU8(dst[:n], src, p.lut8, &p.fill8, &g)
	case 2:
		if aligned {
			run(view[uint16](dst, n), src, p.lut16, &p.fill16, &g)
		} else {
			run(view[[2]byte](dst, n), src, asBytes[[3][256][2]byte](p.lut16), asBytes[[3][2]byte](&p.fill16), &g)
		}
	case 4:
		if aligned {
			run(view[uint32](dst, n), src, p.lut32, &p.fill32, &g)
		} else {
			run(view[[4]byte](dst, n), src, asBytes[[3][256][4]byte](p.lut32), asBytes[[3][4]byte](&p.fill32), &g)
		}
	}
	return nil
}

func (p *Pipeline) checkBuffers(dst, src []byte) error {
	if len(src) != p.in.Bytes() {
		return errorf(ErrBufferSize, "augment: src is %d bytes, want %d for %v", len(src), p.in.Bytes(), p.in)
	}
	if len(dst) < p.out.Bytes() {
		return errorf(ErrBufferSize, "augment: dst is %d bytes, want at least %d for %v", len(dst), p.out.Bytes(), p.out)
	}
	return nil
}

// view returns the first n elements of b as []T; b is long enough
// (checkBuffers) and, for uint16 and uint32, aligned.
func view[T uint16 | uint32 | [2]byte | [4]byte](b []byte, n int) []T {
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}
