package augment

import (
	"math"
	"sync"

	"github.com/loaderd/loaderd/client/sample"
)

// A chain that opens with geometric ops (Resize, CenterCrop,
// RandomResizedCrop) runs in two stages: the resampler maps the image,
// of whatever size, to the fixed size the prefix folds to, into the
// worker's Scratch; then the rest of the chain runs as an ordinary fused
// pipeline over that fixed-size HWC image. Fixed-size chains never take
// this path.

// sized is the geometric stage of a pipeline and the fused rest.
type sized struct {
	geo   geoStage
	inner *Pipeline
	pool  sync.Pool // *Scratch for Apply on a fixed-size input
}

// isGeo reports whether op is a geometric op (value or pointer).
func isGeo(op Op) bool {
	switch op.(type) {
	case Resize, CenterCrop, RandomResizedCrop, *Resize, *CenterCrop, *RandomResizedCrop:
		return true
	}
	return false
}

func geoValue(op Op) Op {
	switch o := op.(type) {
	case *Resize:
		if o != nil {
			return *o
		}
	case *CenterCrop:
		if o != nil {
			return *o
		}
	case *RandomResizedCrop:
		if o != nil {
			return *o
		}
	default:
		return op
	}
	return nil
}

// newSized builds the pipeline of a chain whose first n ops are
// geometric. in may be variable-size (H = W = 0); it must be U8 HWC, as
// decoders produce.
func newSized(in Spec, ops []Op, n int) (*Pipeline, error) {
	check := in
	if in.H == 0 && in.W == 0 {
		check.H, check.W = 1, 1 // only C, dtype and layout to check
	}
	if err := check.Validate(); err != nil {
		return nil, kindError{err, ErrInvalidSpec}
	}
	if in.DType != sample.U8 || in.Layout != sample.HWC {
		return nil, errorf(ErrInvalidSpec, "augment: input %v must be u8 hwc for resize and crop ops", in)
	}
	if in.H > maxSide || in.W > maxSide {
		return nil, errorf(ErrInvalidSpec, "augment: input %v is larger than %d on a side", in, maxSide)
	}
	s := &sized{}
	g := &s.geo
	mid := in
	var canonical []Op
	for i, op := range ops[:n] {
		op = geoValue(op)
		if op == nil {
			return nil, &OpError{Index: i, Err: errText("nil op")}
		}
		var err error
		if mid, err = op.OutSpec(mid); err != nil {
			return nil, &OpError{Index: i, Op: op, Err: err}
		}
		switch o := op.(type) {
		case Resize:
			if g.resize > 0 || g.center > 0 || g.rrc {
				return nil, &OpError{Index: i, Op: op, Err: errText("resize must come first, once")}
			}
			g.resize = o.Size
		case CenterCrop:
			if g.center > 0 || g.rrc {
				return nil, &OpError{Index: i, Op: op, Err: errText("only one crop per pipeline")}
			}
			g.center = o.Size
		case RandomResizedCrop:
			if i > 0 {
				return nil, &OpError{Index: i, Op: op, Err: errText("random_resized_crop resizes itself; it must be the only geometric op")}
			}
			g.rrc, g.rrcSize = true, o.Size
			g.scale, g.ratio = o.ranges()
			g.logRatio = [2]float64{math.Log(g.ratio[0]), math.Log(g.ratio[1])}
			o.Scale, o.Ratio = g.scale, g.ratio
			op = o
		}
		canonical = append(canonical, op)
	}
	if mid.H == 0 {
		return nil, &OpError{Index: n - 1, Op: canonical[n-1],
			Err: errText("the size stays variable; follow resize with center_crop")}
	}
	inner, err := NewPipeline(mid, ops[n:]...)
	if err != nil {
		if oe, ok := err.(*OpError); ok {
			oe.Index += n
		}
		return nil, err
	}
	p := &Pipeline{in: in, out: inner.out, sized: s}
	p.ops = append(canonical, inner.ops...)
	s.inner = inner
	return p, nil
}

// Variable reports whether the pipeline takes images of any size
// (In().H and In().W are 0): then use DrawSized and ApplySized.
func (p *Pipeline) Variable() bool { return p.in.H == 0 && p.in.W == 0 }

// Resamples reports whether the chain opens with geometric ops, which need
// a Scratch per worker (ApplySized).
func (p *Pipeline) Resamples() bool { return p.sized != nil }

// DrawSized is Draw for an image of h×w pixels, which the geometric ops
// need: RandomResizedCrop's box is a pure function of (seed, epoch, index,
// h, w). Params.Box reports the region resampled (the drawn box; the whole
// image for resize; for center_crop alone its window). On a pipeline
// without geometric ops it is Draw.
func (p *Pipeline) DrawSized(seed uint64, epoch, index int64, h, w int) sample.Params {
	s := p.sized
	if s == nil {
		return p.Draw(seed, epoch, index)
	}
	prm := s.inner.Draw(seed, epoch, index)
	if h <= 0 || w <= 0 {
		return prm
	}
	var box sample.Box
	if s.geo.rrc {
		box = s.geo.draw(drawKey(seed, epoch, index), h, w)
	}
	pl, err := s.geo.planFor(h, w, box)
	if err == nil {
		prm.Box = s.geo.reported(pl)
	}
	return prm
}

// ApplySized runs the pipeline on src, an h×w image of In().C channels in
// HWC (exactly h·w·C bytes), with the worker's scratch; dst receives
// Out().Bytes() bytes as for Apply. For a random resized crop prm.Box
// must lie inside the image; for the other geometric ops it is ignored
// (their geometry follows from h and w). ApplySized allocates nothing once
// scratch has served images of the dataset's sizes. On a pipeline without
// geometric ops it is Apply (h and w must match In()).
func (p *Pipeline) ApplySized(dst, src []byte, h, w int, prm sample.Params, scratch *Scratch) error {
	s := p.sized
	if s == nil {
		if h != p.in.H || w != p.in.W {
			return errorf(ErrBufferSize, "augment: image is %dx%d, pipeline takes %v", w, h, p.in)
		}
		return p.applyWith(dst, src, prm, scratch)
	}
	c := p.in.C
	if h <= 0 || w <= 0 || h > maxSide || w > maxSide || len(src) != h*w*c {
		return errorf(ErrBufferSize, "augment: src is %d bytes for a %dx%dx%d image", len(src), w, h, c)
	}
	if !p.Variable() && (h != p.in.H || w != p.in.W) {
		return errorf(ErrBufferSize, "augment: image is %dx%d, pipeline takes %v", w, h, p.in)
	}
	if len(dst) < p.out.Bytes() {
		return errorf(ErrBufferSize, "augment: dst is %d bytes, want at least %d for %v", len(dst), p.out.Bytes(), p.out)
	}
	pl, err := s.geo.planFor(h, w, prm.Box)
	if err != nil {
		return err
	}
	mid := s.inner.in
	scratch.mid = grow(scratch.mid, mid.Bytes())
	scratch.resample(scratch.mid, src, h, w, c, pl)
	return s.inner.applyWith(dst, scratch.mid, prm, scratch)
}

// applyFixed is Apply for a resampling pipeline over a fixed-size input:
// the scratch comes from a pool, so steady state allocates nothing.
func (p *Pipeline) applyFixed(dst, src []byte, prm sample.Params) error {
	if p.Variable() {
		return errorf(ErrInvalidSpec, "augment: a variable-size pipeline needs ApplySized")
	}
	sc, _ := p.sized.pool.Get().(*Scratch)
	if sc == nil {
		sc = new(Scratch)
	}
	err := p.ApplySized(dst, src, p.in.H, p.in.W, prm, sc)
	p.sized.pool.Put(sc)
	return err
}

// Scale returns the largest DCT scaling denominator d of 8, 4, 2 (or 1)
// such that the region the plan resamples, decoded at 1/d, still has at
// least as many pixels on each side as the resize makes of it: then
// decoding at 1/d and resampling (ApplyScaled) only drops detail the
// resize would have averaged away. A chain without a resize (center_crop
// alone) copies pixels and always gets 1.
func (p *Pipeline) Scale(h, w int, prm sample.Params) int {
	s := p.sized
	if s == nil || (!s.geo.rrc && s.geo.resize == 0) || h <= 0 || w <= 0 {
		return 1
	}
	pl, err := s.geo.planFor(h, w, prm.Box)
	if err != nil {
		return 1
	}
	for _, d := range [...]int{8, 4, 2} {
		if int(pl.box.W) >= d*pl.rw && int(pl.box.H) >= d*pl.rh {
			return d
		}
	}
	return 1
}

// ScaledSize is the size of an h×w image decoded at 1/d: libjpeg-turbo's
// TJSCALED, each side rounded up.
func ScaledSize(h, w, d int) (int, int) { return (h + d - 1) / d, (w + d - 1) / d }

// ApplyScaled is ApplySized for an h×w image that was decoded at 1/d
// (src is ScaledSize(h, w, d), as libjpeg's scaled IDCT gives: scaled
// pixel k covers full pixels [k·d, (k+1)·d)). prm is drawn for the full
// size, and the box is mapped onto the scaled image as a fractional box
// (Pillow's resize with box=), so the geometry is the full decode's; the
// values differ from full decode + resize by what the scaled IDCT drops
// (see the package documentation). d = 1 is ApplySized.
func (p *Pipeline) ApplyScaled(dst, src []byte, h, w, d int, prm sample.Params, scratch *Scratch) error {
	if d == 1 {
		return p.ApplySized(dst, src, h, w, prm, scratch)
	}
	s := p.sized
	if s == nil || (!s.geo.rrc && s.geo.resize == 0) || (d != 2 && d != 4 && d != 8) {
		return errorf(ErrParams, "augment: scale 1/%d for %s (only 1/2, 1/4, 1/8 before a resize)", d, p)
	}
	c := p.in.C
	sh, sw := ScaledSize(h, w, d)
	if h <= 0 || w <= 0 || h > maxSide || w > maxSide || len(src) != sh*sw*c {
		return errorf(ErrBufferSize, "augment: src is %d bytes for a %dx%dx%d image at 1/%d", len(src), w, h, c, d)
	}
	if len(dst) < p.out.Bytes() {
		return errorf(ErrBufferSize, "augment: dst is %d bytes, want at least %d for %v", len(dst), p.out.Bytes(), p.out)
	}
	pl, err := s.geo.planFor(h, w, prm.Box)
	if err != nil {
		return err
	}
	b, f := pl.box, float32(d)
	scratch.mid = grow(scratch.mid, s.inner.in.Bytes())
	scratch.resampleBox(scratch.mid, src, sw, sw, sh, c, pl,
		float32(b.X)/f, float32(b.Y)/f, float32(b.X+b.W)/f, float32(b.Y+b.H)/f)
	return s.inner.applyWith(dst, scratch.mid, prm, scratch)
}

// ApplyDecoded runs the pipeline on what a decoder gave for an h×w
// image: src holds region of it (in full-size pixels) decoded at 1/d, as
// the decoder reports. The whole image at any d is ApplyScaled; at d = 1
// the random resized crop's own box (CropBox) alone is ApplyCropped. Any
// other region is an ErrParams error: the pipeline never guesses what
// src holds.
func (p *Pipeline) ApplyDecoded(dst, src []byte, h, w, d int, region sample.Box, prm sample.Params, scratch *Scratch) error {
	if region == (sample.Box{W: int32(w), H: int32(h)}) {
		return p.ApplyScaled(dst, src, h, w, d, prm, scratch)
	}
	if box, ok := p.CropBox(prm); ok && d == 1 && region == box {
		return p.ApplyCropped(dst, src, h, w, prm, scratch)
	}
	return errorf(ErrParams, "augment: %s cannot take region %+v of a %dx%d image at 1/%d (params %+v)", p, region, w, h, d, prm.Box)
}

// CropBox returns the region of an image a random resized crop reads,
// prm.Box, and true; other pipelines read whole images (false). A source
// may decode only that region (loader.Want's Crop) and hand it to
// ApplyCropped.
func (p *Pipeline) CropBox(prm sample.Params) (sample.Box, bool) {
	if s := p.sized; s != nil && s.geo.rrc && prm.Box.W > 0 && prm.Box.H > 0 {
		return prm.Box, true
	}
	return sample.Box{}, false
}

// ApplyCropped is ApplySized for a random resized crop given only the
// pixels of its box: src holds prm.Box of the h×w image (box.W·box.H·C
// bytes, HWC), as a decoder that decodes just the crop returns. The
// output is ApplySized's on the whole image, byte for byte: the
// resampler reads nothing outside the box.
func (p *Pipeline) ApplyCropped(dst, src []byte, h, w int, prm sample.Params, scratch *Scratch) error {
	box, ok := p.CropBox(prm)
	if !ok {
		return errorf(ErrParams, "augment: %s takes whole images, not a crop", p)
	}
	c := p.in.C
	bw, bh := int(box.W), int(box.H)
	if len(src) != bw*bh*c {
		return errorf(ErrBufferSize, "augment: src is %d bytes for a %dx%dx%d crop", len(src), bw, bh, c)
	}
	if len(dst) < p.out.Bytes() {
		return errorf(ErrBufferSize, "augment: dst is %d bytes, want at least %d for %v", len(dst), p.out.Bytes(), p.out)
	}
	pl, err := p.sized.geo.planFor(h, w, box)
	if err != nil {
		return err
	}
	mid := p.sized.inner.in
	scratch.mid = grow(scratch.mid, mid.Bytes())
	scratch.resampleBox(scratch.mid, src, bw, bw, bh, c, pl, 0, 0, float32(bw), float32(bh))
	return p.sized.inner.applyWith(dst, scratch.mid, prm, scratch)
}
