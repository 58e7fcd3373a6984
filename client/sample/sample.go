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
// other chains.
type Params struct {
	Top, Left int32
	Flip      bool
	Box       Box
}

// Box is a rectangle of an image in its pixels: corner (X, Y), size W×H.
type Box struct {
	X, Y, W, H int32
}
