package augment

import (
	"fmt"
	"math"
	"strconv"

	"github.com/loaderd/loaderd/client/sample"
)

// The geometric ops map an image of any size to a fixed size, as
// torchvision's ImageNet transforms do. They must open the chain (see
// NewPipeline), so that the rest of it sees a fixed-size image and runs
// through the fused kernel unchanged.

// Resize scales the image so that its shorter side is Size and its longer
// side int(Size·long/short), as torchvision's Resize(Size) on a PIL image:
// PIL's bilinear filter, widened by the scale when shrinking (antialias).
// Alone it leaves the output size depending on the image's aspect ratio,
// so on a dataset of varying sizes a CenterCrop must follow it.
type Resize struct {
	Size int
}

// CenterCrop cuts the central Size×Size window, as torchvision's
// CenterCrop(Size): the corner is round((side−Size)/2) (half to even, as
// Python's round), and an image smaller than Size is padded with 0.
type CenterCrop struct {
	Size int
}

// RandomResizedCrop cuts a random box and resizes it to Size×Size, as
// torchvision's RandomResizedCrop(Size, Scale, Ratio) on a PIL image: ten
// tries of an area fraction uniform in Scale and an aspect ratio
// log-uniform in Ratio, the first box that fits placed uniformly; after
// ten misses the central box of the image clamped to Ratio. Zero Scale
// and Ratio mean torchvision's defaults, (0.08, 1) and (3/4, 4/3).
type RandomResizedCrop struct {
	Size         int
	Scale, Ratio [2]float64
}

// Default ranges of RandomResizedCrop.
var (
	DefaultRRCScale = [2]float64{0.08, 1}
	DefaultRRCRatio = [2]float64{3.0 / 4.0, 4.0 / 3.0}
)

// OutSpec implements Op. A variable-size image (H = W = 0) stays variable.
func (o Resize) OutSpec(in Spec) (Spec, error) {
	if err := geoCheck(in, o.Size); err != nil {
		return in, err
	}
	if in.H > 0 && in.W > 0 {
		in.H, in.W = resizedSize(in.H, in.W, o.Size)
	}
	return in, nil
}

// OutSpec implements Op.
func (o CenterCrop) OutSpec(in Spec) (Spec, error) {
	if err := geoCheck(in, o.Size); err != nil {
		return in, err
	}
	in.H, in.W = o.Size, o.Size
	return in, nil
}

// OutSpec implements Op.
func (o RandomResizedCrop) OutSpec(in Spec) (Spec, error) {
	if err := geoCheck(in, o.Size); err != nil {
		return in, err
	}
	s, r := o.ranges()
	if !(s[0] > 0 && s[0] <= s[1] && s[1] <= 1) {
		return in, fmt.Errorf("scale %v-%v: want 0 < lo ≤ hi ≤ 1", s[0], s[1])
	}
	if !(r[0] > 0 && r[0] <= r[1] && !math.IsInf(r[1], 0)) {
		return in, fmt.Errorf("ratio %v-%v: want 0 < lo ≤ hi, finite", r[0], r[1])
	}
	in.H, in.W = o.Size, o.Size
	return in, nil
}

func geoCheck(in Spec, size int) error {
	switch {
	case in.DType != sample.U8:
		return fmt.Errorf("input is %s; geometric ops resample pixel values, so they must open the chain", in.DType)
	case size <= 0 || size > maxSide:
		return fmt.Errorf("size %d outside [1, %d]", size, maxSide)
	}
	return nil
}

// ranges returns Scale and Ratio with the defaults filled in.
func (o RandomResizedCrop) ranges() (scale, ratio [2]float64) {
	scale, ratio = o.Scale, o.Ratio
	if scale == [2]float64{} {
		scale = DefaultRRCScale
	}
	if ratio == [2]float64{} {
		ratio = DefaultRRCRatio
	}
	return scale, ratio
}

// String returns "resize=SIZE".
func (o Resize) String() string { return "resize=" + strconv.Itoa(o.Size) }

// String returns "center_crop=SIZE".
func (o CenterCrop) String() string { return "center_crop=" + strconv.Itoa(o.Size) }

// String returns "random_resized_crop=SIZE[:LO-HI[:LO-HI]]", leaving out
// default ranges.
func (o RandomResizedCrop) String() string {
	s := "random_resized_crop=" + strconv.Itoa(o.Size)
	sc, r := o.ranges()
	f := func(v [2]float64) string {
		return strconv.FormatFloat(v[0], 'g', -1, 64) + "-" + strconv.FormatFloat(v[1], 'g', -1, 64)
	}
	if r != DefaultRRCRatio {
		return s + ":" + f(sc) + ":" + f(r)
	}
	if sc != DefaultRRCScale {
		return s + ":" + f(sc)
	}
	return s
}

// resizedSize is torchvision's _compute_resized_output_size for one int:
// the short side becomes size, the long one int(size·long/short) (Python's
// true division, then truncation).
func resizedSize(h, w, size int) (int, int) {
	short, long := h, w
	if w <= h {
		short, long = w, h
	}
	nl := int(float64(size) * float64(long) / float64(short))
	if w <= h {
		return nl, size
	}
	return size, nl
}

// centerOffset is where torchvision's center_crop puts the window along
// one side of n pixels: round((n−c)/2) half to even, or, when the side is
// padded, minus its left padding (c−n)//2.
func centerOffset(n, c int) int {
	if c > n {
		return -((c - n) / 2)
	}
	return int(math.RoundToEven(float64(n-c) / 2))
}

// plan is what the geometric stage does to one image: resample the
// region box of the input to rw×rh, then keep the oh×ow window whose
// corner is (wx, wy) in the resampled image (outside it: zero).
type plan struct {
	box            sample.Box
	rw, rh         int
	wx, wy, ow, oh int
}

// geoStage is a chain's geometric prefix, folded: an optional resize to a
// shorter side, an optional centre crop, or a random resized crop.
type geoStage struct {
	resize, center int // 0 when absent
	rrc            bool
	rrcSize        int
	scale, ratio   [2]float64
	logRatio       [2]float64
}

// planFor works out the plan for an h×w image; for a random resized crop
// box is the drawn one (checked to lie inside the image).
func (g *geoStage) planFor(h, w int, box sample.Box) (plan, error) {
	if g.rrc {
		if box.W <= 0 || box.H <= 0 || box.X < 0 || box.Y < 0 || int(box.X)+int(box.W) > w || int(box.Y)+int(box.H) > h {
			return plan{}, errorf(ErrParams, "augment: box %+v outside the %dx%d image", box, w, h)
		}
		s := g.rrcSize
		return plan{box: box, rw: s, rh: s, ow: s, oh: s}, nil
	}
	p := plan{box: sample.Box{W: int32(w), H: int32(h)}, rw: w, rh: h}
	if g.resize > 0 {
		p.rh, p.rw = resizedSize(h, w, g.resize)
	}
	p.ow, p.oh = p.rw, p.rh
	if g.center > 0 {
		p.ow, p.oh = g.center, g.center
		p.wx, p.wy = centerOffset(p.rw, g.center), centerOffset(p.rh, g.center)
	}
	return p, nil
}

// reported is the Box a plan reports in Params: the region resampled,
// except for a centre crop without resize, where it is the window itself
// (reaching outside the image where torchvision pads).
func (g *geoStage) reported(p plan) sample.Box {
	if g.center > 0 && g.resize == 0 {
		return sample.Box{X: int32(p.wx), Y: int32(p.wy), W: int32(p.ow), H: int32(p.oh)}
	}
	return p.box
}

// draw is torchvision's RandomResizedCrop.get_params for an h×w image,
// with this package's generator in place of torch's: the i-th try uses the
// i-th values of the scale and ratio streams, so a box is a pure function
// of (key, h, w). torchvision draws in float32; here the arithmetic is
// float64, which moves no rule, only the rounding of the draws.
func (g *geoStage) draw(key uint64, h, w int) sample.Box {
	area := float64(h) * float64(w)
	for try := range uint64(10) {
		s := g.scale[0] + (g.scale[1]-g.scale[0])*unitAt(key, streamScale, try)
		lr := g.logRatio[0] + (g.logRatio[1]-g.logRatio[0])*unitAt(key, streamRatio, try)
		target, ar := area*s, math.Exp(lr)
		bw := int(math.RoundToEven(math.Sqrt(target * ar)))
		bh := int(math.RoundToEven(math.Sqrt(target / ar)))
		if bw > 0 && bw <= w && bh > 0 && bh <= h {
			y := uniform(key, streamBoxY, uint64(h-bh)+1)
			x := uniform(key, streamBoxX, uint64(w-bw)+1)
			return sample.Box{X: int32(x), Y: int32(y), W: int32(bw), H: int32(bh)}
		}
	}
	return fallbackBox(h, w, g.ratio)
}

// fallbackBox is get_params' central crop after ten misses: the whole
// image, narrowed to the nearest ratio in range.
func fallbackBox(h, w int, ratio [2]float64) sample.Box {
	bw, bh := w, h
	in := float64(w) / float64(h)
	if in < ratio[0] {
		bh = int(math.RoundToEven(float64(w) / ratio[0]))
	} else if in > ratio[1] {
		bw = int(math.RoundToEven(float64(h) * ratio[1]))
	}
	return sample.Box{X: int32((w - bw) / 2), Y: int32((h - bh) / 2), W: int32(bw), H: int32(bh)}
}
