package sample

import (
	"fmt"
	"strings"
)

// DType is the element type of a batch's pixels.
type DType uint8

// Element types. U8 keeps raw pixel values; the float types hold
// ToTensor's x/255, normalised when the augmentation chain has a Normalize
// op. The values match the wire's DType enum.
const (
	U8 DType = iota + 1
	F32
	F16
	BF16
)

// Size returns the size of one element in bytes (0 for an unknown DType).
func (d DType) Size() int {
	switch d {
	case U8:
		return 1
	case F16, BF16:
		return 2
	case F32:
		return 4
	}
	return 0
}

// IsFloat reports whether d is a floating-point type.
func (d DType) IsFloat() bool { return d == F32 || d == F16 || d == BF16 }

func (d DType) String() string {
	switch d {
	case U8:
		return "u8"
	case F32:
		return "f32"
	case F16:
		return "f16"
	case BF16:
		return "bf16"
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// ParseDType parses "u8", "f32", "f16" or "bf16" (also "uint8", "float32",
// "float16", "bfloat16", and the aliases "float" and "half").
func ParseDType(s string) (DType, error) {
	switch strings.ToLower(s) {
	case "u8", "uint8":
		return U8, nil
	case "f32", "float32", "float":
		return F32, nil
	case "f16", "float16", "half":
		return F16, nil
	case "bf16", "bfloat16":
		return BF16, nil
	}
	return 0, fmt.Errorf("sample: unknown dtype %q (want u8, f32, f16 or bf16)", s)
}

// Layout is the order of an image's axes in memory.
type Layout uint8

// Layouts. HWC interleaves channels (PIL, JPEG decoders); CHW stores one
// plane per channel (PyTorch tensors, the CIFAR binary format). The values
// match the wire's Layout enum.
const (
	HWC Layout = iota + 1
	CHW
)

func (l Layout) String() string {
	switch l {
	case HWC:
		return "hwc"
	case CHW:
		return "chw"
	}
	return fmt.Sprintf("Layout(%d)", uint8(l))
}

// ParseLayout parses "chw" or "hwc" (also "nchw", "nhwc").
func ParseLayout(s string) (Layout, error) {
	switch strings.ToLower(s) {
	case "hwc", "nhwc":
		return HWC, nil
	case "chw", "nchw":
		return CHW, nil
	}
	return 0, fmt.Errorf("sample: unknown layout %q (want chw or hwc)", s)
}

// Params are the random choices the daemon drew for one sample: where the
// crop window starts in the padded image, and whether the result is
// mirrored. They refer to the ops in declared order: with a flip declared
// before the crop, Left is measured in the mirrored padded image. Box is
// the region of the input image that a chain opening with geometric ops
// (resize, center_crop, random_resized_crop) resampled; it is zero for
// other chains. Photo and Erase record the photometric ops' draws and
// random_erasing's box; they are zero for chains without those ops.
type Params struct {
	Top, Left int32
	Flip      bool
	Box       Box
	Photo     Photo
	Erase     Erase
}

// MaxPolicyOps bounds the operations one sample of an AutoAugment-family
// op (auto_augment, rand_augment, trivial_augment_wide) records: Params
// stays a small value with no pointers, so rand_augment's N is at most
// this.
const MaxPolicyOps = 4

// Photo is what the photometric ops drew for one sample, in the terms
// torchvision's functional ops take.
type Photo struct {
	// JitterOrder is color_jitter's random order, torchvision's fn_idx: a
	// permutation of 0 brightness, 1 contrast, 2 saturation, 3 hue.
	JitterOrder [4]uint8
	// Jitter holds the factors, indexed as above (0 for a part that is
	// off): float32, as torchvision draws them.
	Jitter [4]float32
	// Gray: random_grayscale converted the image.
	Gray bool
	// Sigma is gaussian_blur's standard deviation, used for both axes.
	Sigma float32
	// NumOps of Ops were applied, in order.
	NumOps uint8
	Ops    [MaxPolicyOps]PolicyOp
}

// PolicyOp is one operation an AutoAugment-family op applied: Op in
// torchvision's naming, and Magnitude as torchvision's _apply_op receives
// it (signed; a bin's float32 value, or 0 for ops without one).
type PolicyOp struct {
	Op        AugOp
	Magnitude float32
}

// AugOp names one of AutoAugment's operations. The values are the wire's.
type AugOp uint8

// The operations, in torchvision's order.
const (
	OpIdentity AugOp = iota
	OpShearX
	OpShearY
	OpTranslateX
	OpTranslateY
	OpRotate
	OpBrightness
	OpColor
	OpContrast
	OpSharpness
	OpPosterize
	OpSolarize
	OpAutoContrast
	OpEqualize
	OpInvert
	NumAugOps // the number of operations
)

var augOpNames = [NumAugOps]string{"Identity", "ShearX", "ShearY", "TranslateX", "TranslateY",
	"Rotate", "Brightness", "Color", "Contrast", "Sharpness", "Posterize", "Solarize",
	"AutoContrast", "Equalize", "Invert"}

// String returns torchvision's name of the operation, e.g. "ShearX".
func (o AugOp) String() string {
	if o < NumAugOps {
		return augOpNames[o]
	}
	return fmt.Sprintf("AugOp(%d)", uint8(o))
}

// Erase is what random_erasing drew: whether it erased, and the box of
// the output image it wrote (X, Y the column and row of its corner; W or H
// may be 0, as torchvision's rounding allows). Noise keys the normal
// values of value=random (0 otherwise).
type Erase struct {
	Applied bool
	Box     Box
	Noise   uint64
}

// Box is a rectangle of an image in its pixels: corner (X, Y), size W×H.
type Box struct {
	X, Y, W, H int32
}
