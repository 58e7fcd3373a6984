package augment

import (
	"fmt"
	"sync"

	"github.com/loaderd/loaderd/augment/internal/pil"
	"github.com/loaderd/loaderd/client/sample"
)

// A chain with photometric ops or random_erasing runs in stages: the
// crop and flip through the fused kernel into a uint8 HWC scratch image;
// the photometric ops one by one, each from one scratch image into the
// other; the value ops (totensor, normalize, out) as a second fused
// kernel, which is only its 256-entry tables here, into dst; then
// random_erasing on dst, in the output's dtype and layout. A chain
// without them never comes here: the single fused kernel stays its path.

// photoStage is a pipeline's staged form.
type photoStage struct {
	pre *Pipeline // crop and flip, to u8 HWC
	// prePass: pre copies an unmirrored image unchanged (no crop or
	// padding, u8 HWC in and out).
	prePass bool
	steps   []photoStep
	post    *Pipeline // value ops, from the last step's u8 HWC
	// postFlip is post mirrored, for a flipped sample whose steps all
	// commute with the mirror (see mirrorFree): the mirror is then free
	// in the value stage instead of a copy in the crop stage. Nil unless
	// prePass.
	postFlip *Pipeline
	erase    *eraser   // nil without random_erasing
	size     int       // bytes of the largest u8 image between the stages
	blur     int       // float32s of the blur's scratch
	pool     sync.Pool // *Scratch for Apply
}

// photoStep is one photometric op folded over the image it takes.
type photoStep struct {
	op      Op
	in, out Spec // u8 HWC
	jitter  [4]bool
	blur    [2]int
	sigma   [2]float64
	mags    *magnitudes
	pol     []subPolicy
	fill    []uint8
}

// hasStages reports whether ops need the staged form.
func hasStages(ops []Op) bool {
	for _, op := range ops {
		if c, err := canon(op); err == nil {
			if _, ok := c.(RandomErasing); ok || isPhoto(c) {
				return true
			}
		}
	}
	return false
}

// The order a staged chain must keep.
const (
	phaseGeometry = iota // crop, flip
	phasePhoto
	phaseValues // totensor, normalize, out
	phaseErase
)

// newStaged builds the staged pipeline of ops over in (already checked).
func newStaged(in Spec, ops []Op) (*Pipeline, error) {
	st := &photoStage{}
	p := &Pipeline{in: in, out: in, photo: st}
	var pre, vals []Op
	var erase *RandomErasing
	phase, policy := phaseGeometry, -1
	seen := map[string]bool{}
	for i, op := range ops {
		op, err := canon(op)
		if err != nil {
			return nil, &OpError{Index: i, Op: op, Err: err}
		}
		var want int
		switch op.(type) {
		case RandomCrop, RandomHorizontalFlip:
			want = phaseGeometry
		case ToTensor, Normalize, Output:
			want = phaseValues
		case RandomErasing:
			want = phaseErase
		default:
			want = phasePhoto
		}
		if want < phase || (want == phaseErase && phase == phaseErase) {
			return nil, &OpError{Index: i, Op: op, Err: errText(orderRule[want])}
		}
		phase = want
		mid := p.out
		if p.out, err = op.OutSpec(p.out); err != nil {
			return nil, &OpError{Index: i, Op: op, Err: err}
		}
		switch o := op.(type) {
		case RandomErasing:
			erase = &o
		case ToTensor, Normalize, Output:
			vals = append(vals, op)
		case RandomCrop, RandomHorizontalFlip:
			pre = append(pre, op)
		default:
			kind := fmt.Sprintf("%T", op)
			if isPolicy(op) {
				if policy >= 0 {
					return nil, &OpError{Index: i, Op: op, Err: fmt.Errorf("only one of auto_augment, rand_augment and trivial_augment_wide per pipeline (op %d is one): they share Params.Photo.Ops", policy)}
				}
				policy = i
			} else if seen[kind] {
				return nil, &OpError{Index: i, Op: op, Err: errText("only one of each photometric op per pipeline")}
			}
			seen[kind] = true
			mid.Layout = sample.HWC
			out := p.out
			out.Layout = sample.HWC
			st.steps = append(st.steps, newStep(op, mid, out))
		}
		p.ops = append(p.ops, op)
	}
	if err := p.out.Validate(); err != nil {
		return nil, kindError{err, ErrInvalidSpec}
	}
	var err error
	if st.pre, err = NewPipeline(in, append(pre, Output{DType: sample.U8, Layout: sample.HWC})...); err != nil {
		return nil, err
	}
	mid := st.pre.out
	st.prePass = st.pre.in == mid && !st.pre.crop && st.pre.pad == 0
	st.size = mid.Bytes()
	for _, s := range st.steps {
		st.size = max(st.size, s.out.Bytes())
		if _, ok := s.op.(GaussianBlur); ok {
			st.blur = max(st.blur, pil.BlurScratch(pil.Image{H: s.in.H, W: s.in.W, C: s.in.C}))
		}
		mid = s.out
	}
	// The final Output keeps the layout the whole chain folds to (HWC
	// between the stages is this stage's choice, not the chain's).
	if st.post, err = NewPipeline(mid, append(vals, Output{Layout: p.out.Layout})...); err != nil {
		return nil, fmt.Errorf("augment: value stage of %s: %w", FormatOps(p.ops), err)
	}
	if st.post.out != p.out {
		return nil, errorf(ErrInvalidOp, "augment: value stage of %s makes %v, want %v", FormatOps(p.ops), st.post.out, p.out)
	}
	if st.prePass && st.pre.flip {
		flipped := append([]Op{RandomHorizontalFlip{P: 1}}, vals...)
		if st.postFlip, err = NewPipeline(mid, append(flipped, Output{Layout: p.out.Layout})...); err != nil {
			return nil, fmt.Errorf("augment: mirrored value stage of %s: %w", FormatOps(p.ops), err)
		}
	}
	if erase != nil {
		st.erase = newEraser(*erase, p.out)
	}
	return p, nil
}

// mirrorFree reports whether this sample's steps give the mirror of their
// result when given the mirror of their input, bit for bit: true for ops
// of one pixel at a time or of the histogram, false for the geometric
// ones and for the blur, whose float sums land anywhere. Sharpness is
// free although Pillow adds its float32 sums left to right: the exact sum
// is 0.5 + N/13 for an integer N, at least 1/26 from any integer, far
// beyond the rounding of either order, so truncating gives the same byte.
func (st *photoStage) mirrorFree(ph *sample.Photo) bool {
	for i := range st.steps {
		switch st.steps[i].op.(type) {
		case ColorJitter, Grayscale, RandomGrayscale:
		case GaussianBlur:
			return false
		default: // the AutoAugment family
			for _, po := range ph.Ops[:ph.NumOps] {
				switch po.Op {
				case sample.OpShearX, sample.OpShearY, sample.OpTranslateX, sample.OpTranslateY,
					sample.OpRotate:
					return false
				}
			}
		}
	}
	return true
}

var orderRule = [...]string{
	phaseGeometry: "crop and flip must come before the photometric ops, totensor, normalize and out",
	phasePhoto:    "photometric ops act on uint8 pixels: put them after crop and flip, before totensor, normalize and out",
	phaseValues:   "totensor, normalize and out must come before random_erasing",
	phaseErase:    "random_erasing acts on the finished tensor: it must end the chain, once",
}

func newStep(op Op, in, out Spec) photoStep {
	s := photoStep{op: op, in: in, out: out}
	switch o := op.(type) {
	case ColorJitter:
		for k := range s.jitter {
			s.jitter[k] = o.on(k)
		}
	case GaussianBlur:
		s.blur, s.sigma = o.Kernel, o.sigma()
	case AutoAugment:
		s.mags, s.pol, s.fill = newMagnitudes(spaceAuto, 10, in.H, in.W), policies[o.Policy], o.Fill
	case RandAugment:
		s.mags, s.fill = newMagnitudes(spaceAuto, o.bins(), in.H, in.W), o.Fill
	case TrivialAugmentWide:
		s.mags, s.fill = newMagnitudes(spaceWide, o.bins(), in.H, in.W), o.Fill
	}
	return s
}

// draw adds the photometric ops' and random_erasing's draws to prm.
func (st *photoStage) draw(prm *sample.Params, key uint64) {
	ph := &prm.Photo
	for i := range st.steps {
		s := &st.steps[i]
		switch o := s.op.(type) {
		case ColorJitter:
			// torch.randperm(4), then a float32 factor for each part that
			// is on.
			ph.JitterOrder = [4]uint8{0, 1, 2, 3}
			for j := 3; j > 0; j-- {
				k := uniform(key, slot(streamJitterOrder, j), uint64(j+1))
				ph.JitterOrder[j], ph.JitterOrder[k] = ph.JitterOrder[k], ph.JitterOrder[j]
			}
			for k, r := range o.ranges() {
				if s.jitter[k] {
					ph.Jitter[k] = float32(uniform32(unitAt(key, streamJitter, uint64(k)), r[0], r[1]))
				}
			}
		case RandomGrayscale:
			ph.Gray = unit(key, streamGray) < o.P
		case GaussianBlur:
			ph.Sigma = float32(uniform32(unit(key, streamBlur), s.sigma[0], s.sigma[1]))
		case AutoAugment:
			drawAuto(ph, key, s.pol, s.mags)
		case RandAugment:
			drawRand(ph, key, o.N, o.M, s.mags)
		case TrivialAugmentWide:
			drawTrivial(ph, key, o.bins(), s.mags)
		}
	}
	if st.erase != nil {
		prm.Erase = st.erase.draw(key)
	}
}

// check reports params the steps cannot take (they would panic in pil or
// index past the record).
func (st *photoStage) check(prm *sample.Params) error {
	ph := &prm.Photo
	bad := func(what string) error {
		return errorf(ErrParams, "augment: params %+v: %s", *ph, what)
	}
	for i := range st.steps {
		s := &st.steps[i]
		switch o := s.op.(type) {
		case ColorJitter:
			var seen [4]bool
			for _, k := range ph.JitterOrder {
				if k > 3 || seen[k] {
					return bad("jitter order is not a permutation of 0..3")
				}
				seen[k] = true
			}
			for k, f := range ph.Jitter {
				if s.jitter[k] && (isBad(f) || (k < 3 && f < 0) || (k == 3 && (f < -0.5 || f > 0.5))) {
					return bad("jitter factor out of range")
				}
			}
		case GaussianBlur:
			if !(ph.Sigma > 0) || isBad(ph.Sigma) {
				return bad("sigma must be positive")
			}
		case AutoAugment, RandAugment, TrivialAugmentWide:
			n := 2
			if r, ok := o.(RandAugment); ok {
				n = r.N
			} else if _, ok := o.(TrivialAugmentWide); ok {
				n = 1
			}
			if int(ph.NumOps) > n {
				return bad(fmt.Sprintf("%d operations, at most %d", ph.NumOps, n))
			}
			for _, po := range ph.Ops[:ph.NumOps] {
				m := po.Magnitude
				if po.Op >= sample.NumAugOps || isBad(m) || (po.Op == sample.OpPosterize && (m < 0 || m >= 9)) ||
					(po.Op == sample.OpInvert && s.pol == nil) {
					return bad(fmt.Sprintf("operation %v at %v", po.Op, m))
				}
			}
		}
	}
	if st.erase != nil {
		return st.erase.check(prm.Erase)
	}
	return nil
}

// images is the two scratch images the steps alternate between, and the
// caller's own image when the first step may read it in place (it is
// never written).
type images struct {
	buf [2][]byte
	cur int
	in  []byte // nil once a step has written buf
}

func (m *images) cur8(n int) []byte {
	if m.in != nil {
		return m.in[:n]
	}
	return m.buf[m.cur][:n]
}

func (m *images) src(s Spec) pil.Image {
	return pil.Image{Pix: m.cur8(s.Bytes()), H: s.H, W: s.W, C: s.C}
}

func (m *images) dst(s Spec) pil.Image {
	return pil.Image{Pix: m.buf[1-m.cur][:s.Bytes()], H: s.H, W: s.W, C: s.C}
}

// next makes the image just written the current one.
func (m *images) next() { m.cur, m.in = 1-m.cur, nil }

var jitterOps = [4]func(dst, src pil.Image, factor float64){pil.Brightness, pil.Contrast, pil.Saturation, pil.Hue}

// apply runs the stages on src (p.in) into dst with sc's buffers.
func (st *photoStage) apply(p *Pipeline, dst, src []byte, prm sample.Params, sc *Scratch) error {
	if err := p.checkBuffers(dst, src); err != nil {
		return err
	}
	if err := st.check(&prm); err != nil {
		return err
	}
	sc.photo[0] = grow(sc.photo[0], st.size)
	sc.photo[1] = grow(sc.photo[1], st.size)
	sc.blur = grow(sc.blur, st.blur)
	m := images{buf: sc.photo}
	ph := &prm.Photo
	post := st.post
	if st.prePass && prm.Flip && st.mirrorFree(ph) {
		post = st.postFlip
	}
	if st.prePass && (!prm.Flip || post == st.postFlip) {
		// The crop stage would copy src unchanged (a sized chain's
		// resampled image) or only mirror it: the first step reads it in
		// place.
		m.in = src
	} else if err := st.pre.Apply(m.buf[0], src, prm); err != nil {
		return err
	}
	for i := range st.steps {
		s := &st.steps[i]
		switch s.op.(type) {
		case ColorJitter:
			for _, k := range ph.JitterOrder {
				if s.jitter[k] {
					f, v := jitterOps[k], float64(ph.Jitter[k])
					f(m.dst(s.out), m.src(s.in), v)
					m.next()
				}
			}
		case Grayscale:
			pil.Grayscale(m.dst(s.out), m.src(s.in))
			m.next()
		case RandomGrayscale:
			if ph.Gray {
				pil.Grayscale(m.dst(s.out), m.src(s.in))
				m.next()
			}
		case GaussianBlur:
			sg := float64(ph.Sigma)
			pil.GaussianBlur(m.dst(s.out), m.src(s.in), s.blur, [2]float64{sg, sg}, sc.blur)
			m.next()
		default: // the AutoAugment family
			for _, po := range ph.Ops[:ph.NumOps] {
				if po.Op != sample.OpIdentity {
					pil.ApplyOp(m.dst(s.out), m.src(s.in), po.Op, float64(po.Magnitude), s.fill)
					m.next()
				}
			}
		}
	}
	if err := post.Apply(dst, m.cur8(st.post.in.Bytes()), sample.Params{Flip: post == st.postFlip}); err != nil {
		return err
	}
	if st.erase != nil && prm.Erase.Applied {
		st.erase.apply(dst, prm.Erase)
	}
	return nil
}

// applyPooled is Apply for a staged pipeline: the scratch comes from a
// pool, so steady state allocates nothing.
func (st *photoStage) applyPooled(p *Pipeline, dst, src []byte, prm sample.Params) error {
	sc, _ := st.pool.Get().(*Scratch)
	if sc == nil {
		sc = new(Scratch)
	}
	err := st.apply(p, dst, src, prm, sc)
	st.pool.Put(sc)
	return err
}

// applyWith is Apply with the caller's scratch (the sized stages').
func (p *Pipeline) applyWith(dst, src []byte, prm sample.Params, sc *Scratch) error {
	if p.photo != nil {
		return p.photo.apply(p, dst, src, prm, sc)
	}
	return p.Apply(dst, src, prm)
}

// staged returns the pipeline's photometric stage, nil for none.
func (p *Pipeline) staged() *photoStage {
	if p.sized != nil {
		return p.sized.inner.photo
	}
	return p.photo
}

// Photometric reports whether the chain has photometric ops, whose draws
// Params.Photo records (zero otherwise).
func (p *Pipeline) Photometric() bool {
	st := p.staged()
	return st != nil && len(st.steps) > 0
}

// Erases reports whether the chain ends with random_erasing, whose draw
// Params.Erase records (zero otherwise).
func (p *Pipeline) Erases() bool {
	st := p.staged()
	return st != nil && st.erase != nil
}
