package pil

// Image is a dense uint8 image in HWC order: Pix[(y*W+x)*C+c], C is 1 (L)
// or 3 (RGB).
type Image struct {
	Pix     []byte
	H, W, C int
}

// Op is one of AutoAugment's operations, as torchvision's
// autoaugment._apply_op names them.
type Op uint8

// The operations, in the order of RandAugment's augmentation space
// (Identity first), then Invert, which only AutoAugment uses.
const (
	OpIdentity Op = iota
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
	numOps
)

var opNames = [numOps]string{
	OpIdentity:     "Identity",
	OpShearX:       "ShearX",
	OpShearY:       "ShearY",
	OpTranslateX:   "TranslateX",
	OpTranslateY:   "TranslateY",
	OpRotate:       "Rotate",
	OpBrightness:   "Brightness",
	OpColor:        "Color",
	OpContrast:     "Contrast",
	OpSharpness:    "Sharpness",
	OpPosterize:    "Posterize",
	OpSolarize:     "Solarize",
	OpAutoContrast: "AutoContrast",
	OpEqualize:     "Equalize",
	OpInvert:       "Invert",
}

// String returns torchvision's name of the operation, e.g. "ShearX".
func (o Op) String() string {
	if o < numOps {
		return opNames[o]
	}
	return "Op(" + itoa(int(o)) + ")"
}

// ParseOp returns the operation torchvision calls name.
func ParseOp(name string) (Op, bool) {
	for i, n := range opNames {
		if n == name {
			return Op(i), true
		}
	}
	return 0, false
}

func itoa(v int) string {
	if v == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for v > 0 {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
	}
	return string(b[i:])
}
