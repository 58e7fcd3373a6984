package augment

import (
	"fmt"
	"strings"
)

// DType is the element type of a pipeline's output.
type DType uint8

// Output element types. U8 keeps raw pixel values; the float types hold
// ToTensor's x/255, normalised when the pipeline has a Normalize op.
const (
	U8 DType = iota + 1
	F32
	F16
	BF16
)

// Size returns the size of one element in bytes.
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
// "float16", "bfloat16").
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
	return 0, fmt.Errorf("augment: unknown dtype %q (want u8, f32, f16 or bf16)", s)
}

// Layout is the order of an image's axes in memory.
type Layout uint8

// Layouts. HWC interleaves channels (PIL, JPEG decoders); CHW stores one
// plane per channel (PyTorch tensors, the CIFAR binary format).
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

// ParseLayout parses "chw" or "hwc".
func ParseLayout(s string) (Layout, error) {
	switch strings.ToLower(s) {
	case "hwc", "nhwc":
		return HWC, nil
	case "chw", "nchw":
		return CHW, nil
	}
	return 0, fmt.Errorf("augment: unknown layout %q (want chw or hwc)", s)
}

// Spec describes a dense image tensor: its height, width, channels, element
// type and axis order. A source's samples are Specs of dtype U8; a
// pipeline's output is the Spec its ops fold to.
type Spec struct {
	H, W, C int
	DType   DType
	Layout  Layout
}

// Elems returns the number of elements, H·W·C.
func (s Spec) Elems() int { return s.H * s.W * s.C }

// Bytes returns the size of one image in bytes.
func (s Spec) Bytes() int { return s.Elems() * s.DType.Size() }

// Shape returns the dimensions in memory order: [C H W] or [H W C].
func (s Spec) Shape() []int {
	if s.Layout == CHW {
		return []int{s.C, s.H, s.W}
	}
	return []int{s.H, s.W, s.C}
}

// Validate reports whether s describes a usable image.
func (s Spec) Validate() error {
	var errs []string
	if s.H <= 0 || s.W <= 0 {
		errs = append(errs, fmt.Sprintf("size %dx%d", s.H, s.W))
	}
	if s.C != 1 && s.C != 3 {
		errs = append(errs, fmt.Sprintf("%d channels (want 1 or 3)", s.C))
	}
	if s.DType.Size() == 0 {
		errs = append(errs, "dtype "+s.DType.String())
	}
	if s.Layout != HWC && s.Layout != CHW {
		errs = append(errs, "layout "+s.Layout.String())
	}
	if len(errs) > 0 {
		return fmt.Errorf("augment: invalid spec %v: %s", s, strings.Join(errs, ", "))
	}
	return nil
}

func (s Spec) String() string {
	return fmt.Sprintf("%s%v/%s", s.Layout, s.Shape(), s.DType)
}
