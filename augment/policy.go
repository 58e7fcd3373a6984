package augment

import (
	"math"
	"math/big"

	"github.com/loaderd/loaderd/client/sample"
)

// The AutoAugment family's data, from torchvision 0.14's autoaugment.py:
// the learned sub-policies, each operation's magnitude bins and which
// operations take a random sign. The draws follow its forward methods.

// policyStep is one (operation, probability, magnitude bin) of a
// sub-policy; bin < 0 is torchvision's None (magnitude 0).
type policyStep struct {
	op  sample.AugOp
	p   float64
	bin int8
}

type subPolicy [2]policyStep

const none = -1

// Shorthands for the tables.
const (
	shX, shY = sample.OpShearX, sample.OpShearY
	trX, trY = sample.OpTranslateX, sample.OpTranslateY
	rot      = sample.OpRotate
	bri, col = sample.OpBrightness, sample.OpColor
	con, shp = sample.OpContrast, sample.OpSharpness
	pos, sol = sample.OpPosterize, sample.OpSolarize
	aut, equ = sample.OpAutoContrast, sample.OpEqualize
	inv      = sample.OpInvert
)

var policies = [...][]subPolicy{
	PolicyImageNet: {
		{{pos, 0.4, 8}, {rot, 0.6, 9}},
		{{sol, 0.6, 5}, {aut, 0.6, none}},
		{{equ, 0.8, none}, {equ, 0.6, none}},
		{{pos, 0.6, 7}, {pos, 0.6, 6}},
		{{equ, 0.4, none}, {sol, 0.2, 4}},
		{{equ, 0.4, none}, {rot, 0.8, 8}},
		{{sol, 0.6, 3}, {equ, 0.6, none}},
		{{pos, 0.8, 5}, {equ, 1.0, none}},
		{{rot, 0.2, 3}, {sol, 0.6, 8}},
		{{equ, 0.6, none}, {pos, 0.4, 6}},
		{{rot, 0.8, 8}, {col, 0.4, 0}},
		{{rot, 0.4, 9}, {equ, 0.6, none}},
		{{equ, 0.0, none}, {equ, 0.8, none}},
		{{inv, 0.6, none}, {equ, 1.0, none}},
		{{col, 0.6, 4}, {con, 1.0, 8}},
		{{rot, 0.8, 8}, {col, 1.0, 2}},
		{{col, 0.8, 8}, {sol, 0.8, 7}},
		{{shp, 0.4, 7}, {inv, 0.6, none}},
		{{shX, 0.6, 5}, {equ, 1.0, none}},
		{{col, 0.4, 0}, {equ, 0.6, none}},
		{{equ, 0.4, none}, {sol, 0.2, 4}},
		{{sol, 0.6, 5}, {aut, 0.6, none}},
		{{inv, 0.6, none}, {equ, 1.0, none}},
		{{col, 0.6, 4}, {con, 1.0, 8}},
		{{equ, 0.8, none}, {equ, 0.6, none}},
	},
	PolicyCIFAR10: {
		{{inv, 0.1, none}, {con, 0.2, 6}},
		{{rot, 0.7, 2}, {trX, 0.3, 9}},
		{{shp, 0.8, 1}, {shp, 0.9, 3}},
		{{shY, 0.5, 8}, {trY, 0.7, 9}},
		{{aut, 0.5, none}, {equ, 0.9, none}},
		{{shY, 0.2, 7}, {pos, 0.3, 7}},
		{{col, 0.4, 3}, {bri, 0.6, 7}},
		{{shp, 0.3, 9}, {bri, 0.7, 9}},
		{{equ, 0.6, none}, {equ, 0.5, none}},
		{{con, 0.6, 7}, {shp, 0.6, 5}},
		{{col, 0.7, 7}, {trX, 0.5, 8}},
		{{equ, 0.3, none}, {aut, 0.4, none}},
		{{trY, 0.4, 3}, {shp, 0.2, 6}},
		{{bri, 0.9, 6}, {col, 0.2, 8}},
		{{sol, 0.5, 2}, {inv, 0.0, none}},
		{{equ, 0.2, none}, {aut, 0.6, none}},
		{{equ, 0.2, none}, {equ, 0.6, none}},
		{{col, 0.9, 9}, {equ, 0.6, none}},
		{{aut, 0.8, none}, {sol, 0.2, 8}},
		{{bri, 0.1, 3}, {col, 0.7, 0}},
		{{sol, 0.4, 5}, {aut, 0.9, none}},
		{{trY, 0.9, 9}, {trY, 0.7, 9}},
		{{aut, 0.9, none}, {sol, 0.8, 3}},
		{{equ, 0.8, none}, {inv, 0.1, none}},
		{{trY, 0.7, 9}, {aut, 0.9, none}},
	},
	PolicySVHN: {
		{{shX, 0.9, 4}, {inv, 0.2, none}},
		{{shY, 0.9, 8}, {inv, 0.7, none}},
		{{equ, 0.6, none}, {sol, 0.6, 6}},
		{{inv, 0.9, none}, {equ, 0.6, none}},
		{{equ, 0.6, none}, {rot, 0.9, 3}},
		{{shX, 0.9, 4}, {aut, 0.8, none}},
		{{shY, 0.9, 8}, {inv, 0.4, none}},
		{{shY, 0.9, 5}, {sol, 0.2, 6}},
		{{inv, 0.9, none}, {aut, 0.8, none}},
		{{equ, 0.6, none}, {rot, 0.9, 3}},
		{{shX, 0.9, 4}, {sol, 0.3, 3}},
		{{shY, 0.8, 8}, {inv, 0.7, none}},
		{{equ, 0.9, none}, {trY, 0.6, 6}},
		{{inv, 0.9, none}, {equ, 0.6, none}},
		{{con, 0.3, 3}, {rot, 0.8, 4}},
		{{inv, 0.8, none}, {trY, 0.0, 2}},
		{{shY, 0.7, 6}, {sol, 0.4, 8}},
		{{inv, 0.6, none}, {rot, 0.8, 4}},
		{{shY, 0.3, 7}, {trX, 0.9, 3}},
		{{shX, 0.1, 6}, {inv, 0.6, none}},
		{{sol, 0.7, 2}, {trY, 0.6, 7}},
		{{shY, 0.8, 4}, {inv, 0.8, none}},
		{{shX, 0.7, 9}, {trY, 0.8, 3}},
		{{shY, 0.8, 5}, {aut, 0.7, none}},
		{{shX, 0.7, 2}, {inv, 0.1, none}},
	},
}

// wideOps are RandAugment's and TrivialAugmentWide's operations, in the
// order of their augmentation spaces (AutoAugment's without Invert).
var wideOps = [...]sample.AugOp{sample.OpIdentity, shX, shY, trX, trY, rot, bri, col, con, shp, pos, sol, aut, equ}

// signed reports whether torchvision draws a random sign for op.
func signed(op sample.AugOp) bool { return op >= shX && op <= shp }

// magnitudes holds each operation's bins for one augmentation space and
// image size; nil for the operations without (magnitude 0).
type magnitudes [sample.NumAugOps][]float32

// spaceKind picks the augmentation space: AutoAugment's and RandAugment's
// share one, TrivialAugmentWide's is wider.
type spaceKind uint8

const (
	spaceAuto spaceKind = iota
	spaceWide
)

// newMagnitudes builds the bins of an augmentation space for an h×w
// image, as torchvision's _augmentation_space: torch.linspace in float32,
// and posterize's bit counts.
func newMagnitudes(kind spaceKind, bins, h, w int) *magnitudes {
	var m magnitudes
	lin := func(a, b float64) []float32 { return linspace32(a, b, bins) }
	top, shear, move, turn, post := 0.9, 0.3, [2]float64{150.0 / 331.0 * float64(w), 150.0 / 331.0 * float64(h)}, 30.0, 4.0
	if kind == spaceWide {
		top, shear, move, turn, post = 0.99, 0.99, [2]float64{32, 32}, 135.0, 6.0
	}
	m[shX], m[shY] = lin(0, shear), lin(0, shear)
	m[trX], m[trY] = lin(0, move[0]), lin(0, move[1])
	m[rot] = lin(0, turn)
	m[bri], m[col], m[con], m[shp] = lin(0, top), lin(0, top), lin(0, top), lin(0, top)
	m[sol] = lin(255, 0)
	m[pos] = posterizeBins(bins, post)
	return &m
}

// linspace32 is torch.linspace(start, end, n) in float32 as torch 1.13's
// CPU kernel computes it (on its AVX2 path, which the tables' parity test
// confirms value for value): the step in float32; element i from start
// as start + step·i in the first half and from end as end − step·(n−1−i)
// in the second, each one fused multiply-add; but while at least two
// eight-lane vectors remain, each vector takes that value for its first
// lane and adds lane·step (rounded apart) for the others.
func linspace32(start, end float64, n int) []float32 {
	s, e := float32(start), float32(end)
	step := (e - s) / float32(n-1)
	at := func(i int) float32 {
		if i < n/2 {
			return fma32(step, float32(i), s)
		}
		return fma32(-step, float32(n-1-i), e)
	}
	const lanes = 8
	v := make([]float32, n)
	i := 0
	for n-i >= 2*lanes {
		for range 2 {
			base := at(i)
			for l := range lanes {
				v[i+l] = base + float32(float32(l)*step)
			}
			i += lanes
		}
	}
	for ; i < n; i++ {
		v[i] = at(i)
	}
	return v
}

// fma32 is a·b + c rounded once to float32. (float64's FMA would round
// twice.) Only the tables call it.
func fma32(a, b, c float32) float32 {
	x := new(big.Float).SetPrec(200).SetFloat64(float64(a))
	x.Mul(x, new(big.Float).SetFloat64(float64(b)))
	x.Add(x, new(big.Float).SetFloat64(float64(c)))
	f, _ := x.Float32()
	return f
}

// posterizeBins is 8 − round(arange(n) / ((n−1)/div)) as torch computes
// it: a float32 quotient rounded half to even.
func posterizeBins(n int, div float64) []float32 {
	q := float32(float64(n-1) / div)
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(8 - int(math.RoundToEven(float64(float32(i)/q))))
	}
	return v
}

// magnitude is op's magnitude at bin, 0 for an op without bins.
func (m *magnitudes) at(op sample.AugOp, bin int) float32 {
	if t := m[op]; t != nil {
		return t[bin]
	}
	return 0
}

// Streams of the AutoAugment family's draws (continuing rng.go's).
func slot(stream uint64, i int) uint64 { return stream + uint64(i+1)<<20 }

// drawAuto draws AutoAugment: a sub-policy uniformly, then each of its
// two operations if a uniform [0, 1) value is at most its probability
// (compared in float32, as torch compares its float32 draws), with a
// random sign for signed ones. It returns the sub-policy's index.
func drawAuto(ph *sample.Photo, key uint64, pol []subPolicy, m *magnitudes) int {
	id := int(uniform(key, streamPolicy, uint64(len(pol))))
	ph.NumOps = 0
	for i, st := range pol[id] {
		if unitAt(key, streamPolicyProb, uint64(i)) > float64(float32(st.p)) {
			continue
		}
		var mag float32
		if st.bin >= 0 {
			mag = m.at(st.op, int(st.bin))
		}
		if signed(st.op) && rand64(key, streamPolicySign, uint64(i))>>63 == 0 {
			mag = -mag
		}
		ph.Ops[ph.NumOps] = sample.PolicyOp{Op: st.op, Magnitude: mag}
		ph.NumOps++
	}
	return id
}

// drawRand draws RandAugment: n operations uniformly with replacement, at
// bin mag, each with a random sign where signed.
func drawRand(ph *sample.Photo, key uint64, n, bin int, m *magnitudes) {
	ph.NumOps = uint8(n)
	for i := range n {
		op := wideOps[uniform(key, slot(streamPolicy, i), uint64(len(wideOps)))]
		v := m.at(op, bin)
		if signed(op) && rand64(key, streamPolicySign, uint64(i))>>63 != 0 {
			v = -v
		}
		ph.Ops[i] = sample.PolicyOp{Op: op, Magnitude: v}
	}
}

// drawTrivial draws TrivialAugmentWide: one operation uniformly, a bin
// uniformly (none for the operations without bins), a random sign where
// signed.
func drawTrivial(ph *sample.Photo, key uint64, bins int, m *magnitudes) {
	op := wideOps[uniform(key, streamPolicy, uint64(len(wideOps)))]
	var v float32
	if m[op] != nil {
		v = m.at(op, int(uniform(key, streamPolicyMag, uint64(bins))))
	}
	if signed(op) && rand64(key, streamPolicySign, 0)>>63 != 0 {
		v = -v
	}
	ph.NumOps = 1
	ph.Ops[0] = sample.PolicyOp{Op: op, Magnitude: v}
}
