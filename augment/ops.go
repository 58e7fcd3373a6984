package augment

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/loaderd/loaderd/client/sample"
)

// CIFAR-10 per-channel statistics used by the usual torchvision recipes.
var (
	CIFAR10Mean = []float32{0.4914, 0.4822, 0.4465}
	CIFAR10Std  = []float32{0.2470, 0.2435, 0.2616}
)

// ImageNet per-channel statistics (torchvision's models).
var (
	ImageNetMean = []float32{0.485, 0.456, 0.406}
	ImageNetStd  = []float32{0.229, 0.224, 0.225}
)

// RandomCrop pads the uint8 image by Padding pixels on every side with Fill
// and cuts a Size×Size window whose top-left corner is drawn uniformly, as
// torchvision's RandomCrop(Size, padding=Padding, fill=Fill). Fill is a
// pixel value: empty means 0, one value fills every channel, C values fill
// channel by channel. It must come before any op that makes the image float.
type RandomCrop struct {
	Size, Padding int
	Fill          []uint8
}

// OutSpec implements Op.
func (o RandomCrop) OutSpec(in Spec) (Spec, error) {
	switch {
	case in.DType != sample.U8:
		return in, fmt.Errorf("input is %s; crop pads with a pixel value, so it must come before totensor, normalize and float out", in.DType)
	case o.Size <= 0:
		return in, fmt.Errorf("size %d must be positive", o.Size)
	case o.Padding < 0 || o.Padding > maxSide:
		return in, fmt.Errorf("padding %d outside [0, %d]", o.Padding, maxSide)
	case o.Size > in.H+2*o.Padding || o.Size > in.W+2*o.Padding:
		return in, fmt.Errorf("size %d exceeds the padded image %dx%d", o.Size, in.H+2*o.Padding, in.W+2*o.Padding)
	case len(o.Fill) > 1 && len(o.Fill) != in.C:
		return in, fmt.Errorf("%d fill values for %d channels (want 0, 1 or %d)", len(o.Fill), in.C, in.C)
	}
	in.H, in.W = o.Size, o.Size
	return in, nil
}

// String returns the op in ParseOps form: "crop=SIZE:PAD[:FILL]".
func (o RandomCrop) String() string {
	s := "crop=" + strconv.Itoa(o.Size) + ":" + strconv.Itoa(o.Padding)
	if len(o.Fill) > 0 {
		f := make([]string, len(o.Fill))
		for i, v := range o.Fill {
			f[i] = strconv.Itoa(int(v))
		}
		s += ":" + strings.Join(f, "/")
	}
	return s
}

// fillFor returns the fill value of channel c.
func (o RandomCrop) fillFor(c int) uint8 {
	switch len(o.Fill) {
	case 0:
		return 0
	case 1:
		return o.Fill[0]
	}
	return o.Fill[c]
}

// RandomHorizontalFlip mirrors the image left-right with probability P, as
// torchvision's RandomHorizontalFlip(p=P).
type RandomHorizontalFlip struct {
	P float64
}

// OutSpec implements Op.
func (o RandomHorizontalFlip) OutSpec(in Spec) (Spec, error) {
	if !(o.P >= 0 && o.P <= 1) {
		return in, fmt.Errorf("probability %v outside [0, 1]", o.P)
	}
	return in, nil
}

// String returns the op in ParseOps form: "flip=P".
func (o RandomHorizontalFlip) String() string {
	return "flip=" + strconv.FormatFloat(o.P, 'g', -1, 64)
}

// ToTensor turns a uint8 image into float32 x/255 in CHW layout, as
// torchvision's ToTensor.
type ToTensor struct{}

// OutSpec implements Op.
func (ToTensor) OutSpec(in Spec) (Spec, error) {
	if in.DType != sample.U8 {
		return in, fmt.Errorf("input is already %s", in.DType)
	}
	in.DType, in.Layout = sample.F32, sample.CHW
	return in, nil
}

// String returns "totensor".
func (ToTensor) String() string { return "totensor" }

// Normalize computes (x − Mean[c]) / Std[c] per channel in float32, as
// torchvision's Normalize. Mean and Std hold C values or one value for all
// channels. The image must already be float (after ToTensor or a float
// Output).
type Normalize struct {
	Mean, Std []float32
}

// OutSpec implements Op.
func (o Normalize) OutSpec(in Spec) (Spec, error) {
	if !in.DType.IsFloat() {
		return in, fmt.Errorf("input is %s; add totensor or a float out before it", in.DType)
	}
	for _, v := range [][]float32{o.Mean, o.Std} {
		if len(v) != 1 && len(v) != in.C {
			return in, fmt.Errorf("mean and std need 1 or %d values, got %d and %d", in.C, len(o.Mean), len(o.Std))
		}
	}
	for _, m := range o.Mean {
		if isBad(m) {
			return in, fmt.Errorf("mean %v is not finite", m)
		}
	}
	for _, s := range o.Std {
		if isBad(s) || s == 0 {
			return in, fmt.Errorf("std %v must be finite and non-zero", s)
		}
	}
	return in, nil
}

func isBad(v float32) bool { return math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) }

// String returns the op in ParseOps form: "normalize=cifar10",
// "normalize=imagenet" or "normalize=M/M/M:S/S/S".
func (o Normalize) String() string {
	switch {
	case eq32(o.Mean, CIFAR10Mean) && eq32(o.Std, CIFAR10Std):
		return "normalize=cifar10"
	case eq32(o.Mean, ImageNetMean) && eq32(o.Std, ImageNetStd):
		return "normalize=imagenet"
	}
	return "normalize=" + join32(o.Mean) + ":" + join32(o.Std)
}

func (o Normalize) at(c int) (mean, std float32) {
	mean, std = o.Mean[0], o.Std[0]
	if len(o.Mean) > 1 {
		mean = o.Mean[c]
	}
	if len(o.Std) > 1 {
		std = o.Std[c]
	}
	return mean, std
}

func eq32(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

func join32(v []float32) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatFloat(float64(x), 'g', -1, 32)
	}
	return strings.Join(s, "/")
}

// Output sets the element type and layout of the result; a zero field keeps
// the current one. Values are computed in float32 and rounded to DType once,
// at the end (to nearest even for F16 and BF16). A float DType on a uint8
// image implies ToTensor's x/255; U8 keeps raw pixel values and so cannot
// follow ToTensor or Normalize.
type Output struct {
	DType  sample.DType
	Layout sample.Layout
}

// OutSpec implements Op.
func (o Output) OutSpec(in Spec) (Spec, error) {
	if o.DType != 0 && o.DType.Size() == 0 {
		return in, fmt.Errorf("unknown dtype %v", o.DType)
	}
	if o.Layout != 0 && o.Layout != sample.HWC && o.Layout != sample.CHW {
		return in, fmt.Errorf("unknown layout %v", o.Layout)
	}
	if o.DType == sample.U8 && in.DType.IsFloat() {
		return in, fmt.Errorf("u8 output holds raw pixels, but the image is already %s (drop totensor/normalize)", in.DType)
	}
	if o.DType != 0 {
		in.DType = o.DType
	}
	if o.Layout != 0 {
		in.Layout = o.Layout
	}
	return in, nil
}

// String returns the op in ParseOps form: "out=DTYPE:LAYOUT" (either part
// may be missing).
func (o Output) String() string {
	var p []string
	if o.DType != 0 {
		p = append(p, o.DType.String())
	}
	if o.Layout != 0 {
		p = append(p, o.Layout.String())
	}
	return "out=" + strings.Join(p, ":")
}

// CIFARTrain returns torchvision's classic CIFAR training transform:
// RandomCrop(32, padding=4), RandomHorizontalFlip(0.5), and for a float
// out ToTensor and Normalize(CIFAR10Mean, CIFAR10Std), stored as out in
// layout. With out U8 the result is the raw cropped and flipped pixels.
func CIFARTrain(out sample.DType, layout sample.Layout) []Op {
	ops := []Op{RandomCrop{Size: 32, Padding: 4}, RandomHorizontalFlip{P: 0.5}}
	if out.IsFloat() {
		ops = append(ops, ToTensor{}, Normalize{Mean: CIFAR10Mean, Std: CIFAR10Std})
	}
	return append(ops, Output{DType: out, Layout: layout})
}
