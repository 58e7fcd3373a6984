package pil

import "github.com/loaderd/loaderd/client/sample"

// Image is a dense uint8 image in HWC order: Pix[(y*W+x)*C+c], C is 1 (L)
// or 3 (RGB).
type Image struct {
	Pix     []byte
	H, W, C int
}

// Op is one of AutoAugment's operations: client/sample's AugOp, whose
// numbering the wire and sample.Params use, so that a drawn operation
// needs no translation. Its String is torchvision's name ("ShearX").
type Op = sample.AugOp

const numOps = sample.NumAugOps

// ParseOp returns the operation torchvision calls name.
func ParseOp(name string) (Op, bool) {
	for o := range numOps {
		if o.String() == name {
			return o, true
		}
	}
	return 0, false
}
