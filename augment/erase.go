package augment

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/loaderd/loaderd/client/sample"
)

// RandomErasing erases a random box of the output tensor with probability
// P, as torchvision's RandomErasing(P, Scale, Ratio, value): up to ten
// tries of an area fraction uniform in Scale and an aspect ratio
// log-uniform in Ratio, the first box smaller than the image placed
// uniformly; after ten misses nothing is erased. It acts on the tensor
// the chain made, after normalize and out, so it must end the chain. The
// box is set to Value (one value, or one per channel, in the output's
// units: after normalize, 0 is the mean) or, with Random, to standard
// normal noise drawn from the sample's key. Zero Scale and Ratio mean
// torchvision's defaults.
type RandomErasing struct {
	P            float64
	Scale, Ratio [2]float64
	Value        []float32
	Random       bool
}

// Default ranges of RandomErasing.
var (
	DefaultEraseScale = [2]float64{0.02, 0.33}
	DefaultEraseRatio = [2]float64{0.3, 3.3}
)

func (o RandomErasing) ranges() (scale, ratio [2]float64) {
	scale, ratio = o.Scale, o.Ratio
	if scale == [2]float64{} {
		scale = DefaultEraseScale
	}
	if ratio == [2]float64{} {
		ratio = DefaultEraseRatio
	}
	return scale, ratio
}

// OutSpec implements Op.
func (o RandomErasing) OutSpec(in Spec) (Spec, error) {
	s, r := o.ranges()
	switch {
	case !(o.P >= 0 && o.P <= 1):
		return in, fmt.Errorf("probability %v outside [0, 1]", o.P)
	case !(s[0] >= 0 && s[0] <= s[1] && s[1] <= 1):
		return in, fmt.Errorf("scale %v-%v: want 0 ≤ lo ≤ hi ≤ 1", s[0], s[1])
	case !(r[0] > 0 && r[0] <= r[1]) || math.IsInf(r[1], 0):
		return in, fmt.Errorf("ratio %v-%v: want 0 < lo ≤ hi, finite", r[0], r[1])
	case o.Random && len(o.Value) > 0:
		return in, fmt.Errorf("value is either random or numbers, not both")
	case len(o.Value) > 1 && len(o.Value) != in.C:
		return in, fmt.Errorf("%d values for %d channels (want 1 or %d)", len(o.Value), in.C, in.C)
	}
	for _, v := range o.Value {
		if isBad(v) {
			return in, fmt.Errorf("value %v is not finite", v)
		}
		if in.DType == sample.U8 && (v != float32(math.Trunc(float64(v))) || v < 0 || v > 255) {
			return in, fmt.Errorf("value %v does not fit the u8 output (want an integer 0..255)", v)
		}
	}
	if o.Random && !in.DType.IsFloat() {
		return in, fmt.Errorf("random values need a float output, not %s", in.DType)
	}
	return in, nil
}

// String returns "random_erasing=P:SCALE:RATIO:VALUE", VALUE being V,
// V/V/V or random.
func (o RandomErasing) String() string {
	s, r := o.ranges()
	v := "random"
	if !o.Random {
		v = "0"
		if len(o.Value) > 0 {
			v = join32(o.Value)
		}
	}
	return "random_erasing=" + strconv.FormatFloat(o.P, 'g', -1, 64) + ":" + formatRange(s) + ":" + formatRange(r) + ":" + v
}

// eraser is a RandomErasing folded over the output spec.
type eraser struct {
	p        float64
	scale    [2]float64
	logRatio [2]float32 // torch.log of the float32 ratio
	random   bool
	out      Spec
	val      [3][4]byte // each channel's value as an output element
}

func newEraser(o RandomErasing, out Spec) *eraser {
	s, r := o.ranges()
	e := &eraser{p: o.P, scale: s, random: o.Random, out: out}
	for i, x := range r {
		e.logRatio[i] = float32(math.Log(float64(float32(x))))
	}
	for c := range out.C {
		var v float32
		switch len(o.Value) {
		case 1:
			v = o.Value[0]
		case out.C:
			v = o.Value[c]
		}
		if out.DType == sample.U8 {
			e.val[c][0] = uint8(v)
		} else {
			convert(e.val[c][:], out.DType, v)
		}
	}
	return e
}

// uniform32 is torch.empty(1).uniform_(lo, hi).item(): a float32 value.
func uniform32(u, lo, hi float64) float64 { return float64(float32(lo + (hi-lo)*u)) }

// draw is RandomErasing.get_params with its probability: float32 draws,
// Python's round (half to even) and int, a box strictly smaller than the
// image on both sides.
func (e *eraser) draw(key uint64) sample.Erase {
	var er sample.Erase
	if !(unit(key, streamErase) < e.p) {
		return er
	}
	ih, iw := e.out.H, e.out.W
	area := float64(ih * iw)
	for j := range uint64(10) {
		ea := area * uniform32(unitAt(key, streamEraseScale, j), e.scale[0], e.scale[1])
		lr := float32(uniform32(unitAt(key, streamEraseRatio, j), float64(e.logRatio[0]), float64(e.logRatio[1])))
		ar := float64(float32(math.Exp(float64(lr))))
		h := int(math.RoundToEven(math.Sqrt(ea * ar)))
		w := int(math.RoundToEven(math.Sqrt(ea / ar)))
		if !(h < ih && w < iw) {
			continue
		}
		er.Applied = true
		er.Box = sample.Box{
			Y: int32(uniform(key, streamEraseY, uint64(ih-h+1))),
			X: int32(uniform(key, streamEraseX, uint64(iw-w+1))),
			H: int32(h), W: int32(w)}
		if e.random {
			er.Noise = rand64(key, streamEraseNoise, 0) | 1 // never 0: 0 means no noise
		}
		return er
	}
	return er
}

// check reports whether er fits the output image.
func (e *eraser) check(er sample.Erase) error {
	b := er.Box
	if !er.Applied {
		return nil
	}
	if b.X < 0 || b.Y < 0 || b.W < 0 || b.H < 0 || int(b.X)+int(b.W) > e.out.W || int(b.Y)+int(b.H) > e.out.H || e.random != (er.Noise != 0) {
		return errorf(ErrParams, "augment: erase %+v does not fit the %dx%d output (random %v)", er, e.out.W, e.out.H, e.random)
	}
	return nil
}

// normal is the noise value of element k of the box (channel-major, as
// torch's [C, h, w] tensor): a Box-Muller standard normal in float32.
func normal(noise uint64, k int) float32 {
	u1 := 1 - unitAt(noise, streamNoise, 2*uint64(k)) // (0, 1]: the log stays finite
	u2 := unitAt(noise, streamNoise, 2*uint64(k)+1)
	return float32(math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2))
}

// apply writes the erased box into dst, an image of e.out.
func (e *eraser) apply(dst []byte, er sample.Erase) {
	o := e.out
	sz := o.DType.Size()
	b := er.Box
	h, w := int(b.H), int(b.W)
	var el [4]byte
	for c := range o.C {
		for y := range h {
			for x := range w {
				var at int
				if o.Layout == sample.CHW {
					at = ((c*o.H+int(b.Y)+y)*o.W + int(b.X) + x) * sz
				} else {
					at = (((int(b.Y)+y)*o.W+int(b.X)+x)*o.C + c) * sz
				}
				v := &e.val[c]
				if e.random {
					convert(el[:], o.DType, normal(er.Noise, (c*h+y)*w+x))
					v = &el
				}
				copy(dst[at:at+sz], v[:sz])
			}
		}
	}
}

// parseErase reads random_erasing's value: [P[:SCALE[:RATIO[:VALUE]]]].
func parseErase(arg string, hasArg bool) (Op, error) {
	o := RandomErasing{P: 0.5, Scale: DefaultEraseScale, Ratio: DefaultEraseRatio}
	if !hasArg {
		return o, nil
	}
	parts := strings.Split(arg, ":")
	if len(parts) > 4 {
		return nil, fmt.Errorf("want random_erasing=P[:SCALE_LO-SCALE_HI[:RATIO_LO-RATIO_HI[:VALUE]]]")
	}
	var err error
	if o.P, err = strconv.ParseFloat(parts[0], 64); err != nil {
		return nil, fmt.Errorf("bad probability %q", parts[0])
	}
	for i, r := range parts[1:min(len(parts), 3)] {
		v, err := parseRange(r)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			o.Scale = v
		} else {
			o.Ratio = v
		}
	}
	if len(parts) == 4 {
		if strings.EqualFold(parts[3], "random") {
			o.Random = true
		} else if o.Value, err = parseFloats(parts[3]); err != nil {
			return nil, err
		} else if len(o.Value) == 1 && o.Value[0] == 0 {
			o.Value = nil // 0 is the default
		}
	}
	return o, nil
}
