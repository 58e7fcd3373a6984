package augment

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/loaderd/loaderd/client/sample"
)

// The photometric ops change pixel values (and AutoAugment's geometric
// ops move pixels) on the uint8 image, as torchvision's transforms do on
// PIL images. They come after the crop and flip ops, or after the
// geometric ops that open a chain, and before totensor, normalize and
// out. Their pixel arithmetic is augment/internal/pil's; this package
// declares them, draws their parameters with torchvision's rules and runs
// them between two scratch images (see photoStage).

// ColorJitter changes brightness, contrast, saturation and hue by factors
// drawn uniformly from the ranges, in a random order, as torchvision's
// ColorJitter with (min, max) pairs. A part whose range is {0, 0}, or
// {1, 1} for the first three, is off, as torchvision's None. ParseOps
// also takes torchvision's single numbers: b means
// {max(0, 1−b), 1+b}, and for hue h means {−h, h}.
type ColorJitter struct {
	Brightness, Contrast, Saturation, Hue [2]float64
}

// jitterCenter is the factor that leaves a part's image unchanged.
var jitterCenter = [4]float64{1, 1, 1, 0}

func (o ColorJitter) ranges() [4][2]float64 {
	return [4][2]float64{o.Brightness, o.Contrast, o.Saturation, o.Hue}
}

// on reports whether part k (0 brightness … 3 hue) is enabled.
func (o ColorJitter) on(k int) bool {
	r := o.ranges()[k]
	return r != [2]float64{} && r != [2]float64{jitterCenter[k], jitterCenter[k]}
}

// OutSpec implements Op.
func (o ColorJitter) OutSpec(in Spec) (Spec, error) {
	if err := photoInput(in); err != nil {
		return in, err
	}
	names := [4]string{"brightness", "contrast", "saturation", "hue"}
	for k, r := range o.ranges() {
		lo, hi := 0.0, math.Inf(1)
		if k == 3 {
			lo, hi = -0.5, 0.5
		}
		if !(lo <= r[0] && r[0] <= r[1] && r[1] <= hi) || math.IsInf(r[1], 0) {
			return in, fmt.Errorf("%s range %v-%v: want %v ≤ min ≤ max ≤ %v, finite", names[k], r[0], r[1], lo, hi)
		}
	}
	return in, nil
}

// String returns the op in ParseOps form, "color_jitter=B:C:S:H", each
// part a single number where one gives its range exactly, else LO-HI.
func (o ColorJitter) String() string {
	parts := make([]string, 4)
	for k, r := range o.ranges() {
		parts[k] = formatJitter(r, k == 3)
	}
	return "color_jitter=" + strings.Join(parts, ":")
}

// jitterRange is torchvision's range for a single number v.
func jitterRange(v float64, hue bool) [2]float64 {
	if hue {
		return [2]float64{-v, v}
	}
	return [2]float64{max(1-v, 0), 1 + v}
}

// formatJitter writes r as the shortest single number that parses back
// to it, or as LO-HI.
func formatJitter(r [2]float64, hue bool) string {
	if r == [2]float64{} || (!hue && r == [2]float64{1, 1}) {
		return "0"
	}
	v := r[1] - 1
	if hue {
		v = r[1]
	}
	for prec := 1; prec <= 17 && v >= 0; prec++ {
		s := strconv.FormatFloat(v, 'g', prec, 64)
		if x, err := strconv.ParseFloat(s, 64); err == nil && jitterRange(x, hue) == r {
			return s
		}
	}
	return formatRange(r)
}

func formatRange(r [2]float64) string {
	return strconv.FormatFloat(r[0], 'g', -1, 64) + "-" + strconv.FormatFloat(r[1], 'g', -1, 64)
}

// Grayscale converts the image to grey with ITU-R 601-2 luma, as
// torchvision's Grayscale(num_output_channels=Channels): Channels 1 (or
// 0) gives one channel, 3 three equal ones.
type Grayscale struct {
	Channels int
}

// OutSpec implements Op.
func (o Grayscale) OutSpec(in Spec) (Spec, error) {
	if err := photoInput(in); err != nil {
		return in, err
	}
	switch o.Channels {
	case 0, 1:
		in.C = 1
	case 3:
		in.C = 3
	default:
		return in, fmt.Errorf("%d output channels (want 1 or 3)", o.Channels)
	}
	return in, nil
}

// String returns "grayscale" or "grayscale=3".
func (o Grayscale) String() string {
	if o.Channels == 3 {
		return "grayscale=3"
	}
	return "grayscale"
}

// RandomGrayscale converts the image to grey, keeping its channels, with
// probability P, as torchvision's RandomGrayscale(p=P).
type RandomGrayscale struct {
	P float64
}

// OutSpec implements Op.
func (o RandomGrayscale) OutSpec(in Spec) (Spec, error) {
	if err := photoInput(in); err != nil {
		return in, err
	}
	if !(o.P >= 0 && o.P <= 1) {
		return in, fmt.Errorf("probability %v outside [0, 1]", o.P)
	}
	return in, nil
}

// String returns "random_grayscale=P".
func (o RandomGrayscale) String() string {
	return "random_grayscale=" + strconv.FormatFloat(o.P, 'g', -1, 64)
}

// GaussianBlur blurs with a Gaussian kernel of Kernel = {kx, ky} taps
// (odd) and a standard deviation drawn uniformly from Sigma for both
// axes, as torchvision's GaussianBlur((kx, ky), Sigma). A zero Sigma is
// torchvision's default, {0.1, 2}.
type GaussianBlur struct {
	Kernel [2]int
	Sigma  [2]float64
}

// DefaultBlurSigma is GaussianBlur's default range of sigma.
var DefaultBlurSigma = [2]float64{0.1, 2}

func (o GaussianBlur) sigma() [2]float64 {
	if o.Sigma == [2]float64{} {
		return DefaultBlurSigma
	}
	return o.Sigma
}

// OutSpec implements Op.
func (o GaussianBlur) OutSpec(in Spec) (Spec, error) {
	if err := photoInput(in); err != nil {
		return in, err
	}
	for i, k := range o.Kernel {
		if k <= 0 || k%2 == 0 || k > 255 {
			return in, fmt.Errorf("kernel size %d must be odd, 1..255", k)
		}
		// torch pads by reflection, which needs the half-width below the
		// side.
		if side := [2]int{in.W, in.H}[i]; k/2 >= side {
			return in, fmt.Errorf("kernel %dx%d is too large for a %dx%d image", o.Kernel[0], o.Kernel[1], in.W, in.H)
		}
	}
	if s := o.sigma(); !(s[0] > 0 && s[0] <= s[1]) || math.IsInf(s[1], 0) {
		return in, fmt.Errorf("sigma %v-%v: want 0 < min ≤ max, finite", s[0], s[1])
	}
	return in, nil
}

// String returns "gaussian_blur=K:LO-HI" (or KX/KY for unequal sides).
func (o GaussianBlur) String() string {
	k := strconv.Itoa(o.Kernel[0])
	if o.Kernel[1] != o.Kernel[0] {
		k += "/" + strconv.Itoa(o.Kernel[1])
	}
	return "gaussian_blur=" + k + ":" + formatRange(o.sigma())
}

// AutoAugmentPolicy names a learned AutoAugment policy.
type AutoAugmentPolicy uint8

// The policies of torchvision's AutoAugmentPolicy; the zero value is
// torchvision's default.
const (
	PolicyImageNet AutoAugmentPolicy = iota
	PolicyCIFAR10
	PolicySVHN
)

func (p AutoAugmentPolicy) String() string {
	switch p {
	case PolicyImageNet:
		return "imagenet"
	case PolicyCIFAR10:
		return "cifar10"
	case PolicySVHN:
		return "svhn"
	}
	return fmt.Sprintf("AutoAugmentPolicy(%d)", uint8(p))
}

// AutoAugment applies one sub-policy of Policy drawn uniformly, each of
// its two operations with its probability and its magnitude bin, as
// torchvision's AutoAugment(Policy, fill=Fill) with nearest-neighbour
// interpolation. Fill is the pixel value the geometric operations show
// where they uncover the image (empty: torchvision's default, 0; one
// value, or one per channel).
type AutoAugment struct {
	Policy AutoAugmentPolicy
	Fill   []uint8
}

// OutSpec implements Op.
func (o AutoAugment) OutSpec(in Spec) (Spec, error) {
	if o.Policy > PolicySVHN {
		return in, fmt.Errorf("unknown policy %d", o.Policy)
	}
	return in, policyInput(in, o.Fill)
}

// String returns "auto_augment=POLICY[:FILL]".
func (o AutoAugment) String() string {
	return "auto_augment=" + o.Policy.String() + formatFill(o.Fill)
}

// RandAugment applies N operations drawn uniformly (with replacement)
// from its 14, each at magnitude bin M of Bins, with a random sign where
// the operation has one, as torchvision's RandAugment(N, M, Bins,
// fill=Fill). Bins 0 means torchvision's 31. N is at most
// sample.MaxPolicyOps, the operations Params records.
type RandAugment struct {
	N, M, Bins int
	Fill       []uint8
}

func (o RandAugment) bins() int {
	if o.Bins == 0 {
		return 31
	}
	return o.Bins
}

// OutSpec implements Op.
func (o RandAugment) OutSpec(in Spec) (Spec, error) {
	switch {
	case o.N < 0 || o.N > sample.MaxPolicyOps:
		return in, fmt.Errorf("%d operations (want 0..%d, what Params records)", o.N, sample.MaxPolicyOps)
	case o.bins() < 2 || o.bins() > maxBins:
		return in, fmt.Errorf("%d magnitude bins (want 2..%d)", o.bins(), maxBins)
	case o.M < 0 || o.M >= o.bins():
		return in, fmt.Errorf("magnitude %d outside the bins 0..%d", o.M, o.bins()-1)
	}
	return in, policyInput(in, o.Fill)
}

// String returns "rand_augment=N:M:BINS[:FILL]".
func (o RandAugment) String() string {
	return "rand_augment=" + strconv.Itoa(o.N) + ":" + strconv.Itoa(o.M) + ":" + strconv.Itoa(o.bins()) + formatFill(o.Fill)
}

// TrivialAugmentWide applies one operation drawn uniformly from its 14,
// at a magnitude bin drawn uniformly from Bins, with a random sign where
// the operation has one, as torchvision's TrivialAugmentWide(Bins,
// fill=Fill). Bins 0 means torchvision's 31.
type TrivialAugmentWide struct {
	Bins int
	Fill []uint8
}

func (o TrivialAugmentWide) bins() int {
	if o.Bins == 0 {
		return 31
	}
	return o.Bins
}

// OutSpec implements Op.
func (o TrivialAugmentWide) OutSpec(in Spec) (Spec, error) {
	if b := o.bins(); b < 2 || b > maxBins {
		return in, fmt.Errorf("%d magnitude bins (want 2..%d)", b, maxBins)
	}
	return in, policyInput(in, o.Fill)
}

// String returns "trivial_augment_wide=BINS[:FILL]".
func (o TrivialAugmentWide) String() string {
	return "trivial_augment_wide=" + strconv.Itoa(o.bins()) + formatFill(o.Fill)
}

// maxBins bounds the magnitude bins (torchvision has no bound; a table
// per op is built at NewPipeline).
const maxBins = 1024

// photoInput checks the image a photometric op takes.
func photoInput(in Spec) error {
	if in.DType != sample.U8 {
		return fmt.Errorf("input is %s; photometric ops act on uint8 pixels, so they must come before totensor, normalize and out", in.DType)
	}
	return nil
}

func policyInput(in Spec, fill []uint8) error {
	if err := photoInput(in); err != nil {
		return err
	}
	if len(fill) > 1 && len(fill) != in.C {
		return fmt.Errorf("%d fill values for %d channels (want 0, 1 or %d)", len(fill), in.C, in.C)
	}
	return nil
}

// formatFill writes ":FILL" for a non-empty fill, as crop's.
func formatFill(fill []uint8) string {
	if len(fill) == 0 {
		return ""
	}
	f := make([]string, len(fill))
	for i, v := range fill {
		f[i] = strconv.Itoa(int(v))
	}
	return ":" + strings.Join(f, "/")
}

// isPhoto reports whether op is a photometric op (a value, as canon
// returns).
func isPhoto(op Op) bool {
	switch op.(type) {
	case ColorJitter, Grayscale, RandomGrayscale, GaussianBlur, AutoAugment, RandAugment, TrivialAugmentWide:
		return true
	}
	return false
}

// isPolicy reports whether op is one of the AutoAugment family, which
// share Params.Photo.Ops.
func isPolicy(op Op) bool {
	switch op.(type) {
	case AutoAugment, RandAugment, TrivialAugmentWide:
		return true
	}
	return false
}

// canonPhoto returns a photometric op or RandomErasing in canonical form:
// private copies of its slices, defaults written out, a jitter part that
// is off as {0, 0}, so that FormatOps and ParseOps give it back.
func canonPhoto(op Op) Op {
	switch o := op.(type) {
	case ColorJitter:
		r := o.ranges()
		for k := range r {
			if !o.on(k) {
				r[k] = [2]float64{}
			}
		}
		return ColorJitter{Brightness: r[0], Contrast: r[1], Saturation: r[2], Hue: r[3]}
	case Grayscale:
		if o.Channels == 0 {
			o.Channels = 1
		}
		return o
	case GaussianBlur:
		o.Sigma = o.sigma()
		return o
	case AutoAugment:
		o.Fill = copyFill(o.Fill)
		return o
	case RandAugment:
		o.Bins, o.Fill = o.bins(), copyFill(o.Fill)
		return o
	case TrivialAugmentWide:
		o.Bins, o.Fill = o.bins(), copyFill(o.Fill)
		return o
	case RandomErasing:
		o.Scale, o.Ratio = o.ranges()
		if len(o.Value) == 1 && math.Float32bits(o.Value[0]) == 0 {
			o.Value = nil // 0, the default
		}
		o.Value = append([]float32(nil), o.Value...)
		return o
	}
	return op
}

func copyFill(f []uint8) []uint8 { return append([]uint8(nil), f...) }
