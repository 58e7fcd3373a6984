package sample

import "fmt"

// MixKind names the batch op that mixed a batch. The values match the
// wire's MixKind enum.
type MixKind uint8

// Batch ops.
const (
	NoMix  MixKind = iota // the batch is as its samples were augmented
	MixUp                 // torchvision v2's MixUp
	CutMix                // torchvision v2's CutMix
)

func (k MixKind) String() string {
	switch k {
	case NoMix:
		return "none"
	case MixUp:
		return "mixup"
	case CutMix:
		return "cutmix"
	}
	return fmt.Sprintf("MixKind(%d)", uint8(k))
}

// Mix is what a batch op drew for one batch. Every sample i was mixed
// with sample i-1 (sample 0 with the last), torchvision's roll(1, 0):
// MixUp blended them with weights Lambda and 1-Lambda; CutMix pasted Box
// of the partner into the sample, and Lambda is the share of the image
// left, 1 - area(Box)/(H·W). Either way sample i's soft label is Lambda
// of its own class and 1-Lambda of its partner's (see SoftLabels).
type Mix struct {
	Kind   MixKind
	Lambda float64 // torchvision's lam (float64, as Python holds it)
	Box    Box     // CutMix's pasted box in output pixels; zero for MixUp
}

// Weights returns Lambda and 1-Lambda as float32, as torch multiplies a
// float32 tensor by the Python floats lam and 1.0 - lam: the factors of
// the pixels' MixUp and of the soft labels. Without a mix it is (1, 0).
func (m Mix) Weights() (own, partner float32) {
	if m.Kind == NoMix {
		return 1, 0
	}
	return float32(m.Lambda), float32(1 - m.Lambda)
}

// SoftLabels writes the batch's soft labels into dst, len(labels) rows of
// classes float32 values: row i is torchvision's
// lam·one_hot(labels[i]) + (1-lam)·one_hot(labels[i-1]) (labels[n-1] for
// row 0), in float32, so a class both hold gets the float32 sum. Without
// a mix, a row is one_hot(labels[i]). It fails, writing nothing, when dst
// is shorter than len(labels)·classes or a label is outside [0, classes).
func (m Mix) SoftLabels(dst []float32, labels []int32, classes int) error {
	n := len(labels)
	if classes <= 0 || len(dst) < n*classes {
		return fmt.Errorf("sample: soft labels of %d samples and %d classes need %d values, dst has %d", n, classes, n*classes, len(dst))
	}
	for i, y := range labels {
		if y < 0 || int(y) >= classes {
			return fmt.Errorf("sample: label %d of sample %d is outside the %d classes", y, i, classes)
		}
	}
	own, partner := m.Weights()
	clear(dst[:n*classes])
	for i, y := range labels {
		row := dst[i*classes : (i+1)*classes]
		row[y] = own
		if m.Kind != NoMix {
			prev := labels[(i+n-1)%n]
			row[prev] = float32(row[prev] + partner)
		}
	}
	return nil
}
