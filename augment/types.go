package augment

import (
	"fmt"
	"strings"

	"github.com/loaderd/loaderd/client/sample"
)

// Spec describes a dense image tensor: its height, width, channels, element
// type and axis order. A source's samples are Specs of dtype U8; a
// pipeline's output is the Spec its ops fold to.
type Spec struct {
	H, W, C int
	DType   sample.DType
	Layout  sample.Layout
}

// Elems returns the number of elements, H·W·C.
func (s Spec) Elems() int { return s.H * s.W * s.C }

// Bytes returns the size of one image in bytes.
func (s Spec) Bytes() int { return s.Elems() * s.DType.Size() }

// Shape returns the dimensions in memory order: [C H W] or [H W C].
func (s Spec) Shape() []int {
	if s.Layout == sample.CHW {
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
	if s.Layout != sample.HWC && s.Layout != sample.CHW {
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
