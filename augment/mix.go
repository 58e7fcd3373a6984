package augment

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/loaderd/loaderd/client/sample"
)

// MixUp blends each batch with itself rolled by one sample, as
// torchvision v2's MixUp(alpha=Alpha): one λ ~ Beta(Alpha, Alpha) per
// batch, sample i becomes λ·x[i] + (1-λ)·x[i-1] (x[n-1] for sample 0),
// and its soft label λ of its class and 1-λ of its partner's. It is a
// batch op: it acts on the finished batch, in the output's float dtype
// and layout, so it ends the chain (after out and random_erasing).
type MixUp struct {
	Alpha float64
}

// CutMix pastes a box of each batch's rolled partner into each sample, as
// torchvision v2's CutMix(alpha=Alpha): λ ~ Beta(Alpha, Alpha), a box of
// area (1-λ)·H·W centred at a uniform pixel, clipped to the image, the
// same for the whole batch; λ is then recomputed from the clipped box.
// With a MixUp in the same chain each batch takes one of the two, as
// torchvision's RandomChoice([MixUp, CutMix]): CutMix with probability
// Switch (0 means 0.5, RandomChoice's default). Like MixUp it ends the
// chain.
type CutMix struct {
	Alpha  float64
	Switch float64
}

// checkMix is the batch ops' OutSpec: a positive, finite alpha on a float
// output, which they leave as it is.
func checkMix(alpha float64, in Spec) (Spec, error) {
	if !(alpha > 0) || math.IsInf(alpha, 0) {
		return in, fmt.Errorf("alpha %v must be positive and finite", alpha)
	}
	if !in.DType.IsFloat() {
		return in, fmt.Errorf("mixes float tensors (as torchvision, which requires a float image), and the output is %s: use out=f32, f16 or bf16", in.DType)
	}
	return in, nil
}

// OutSpec implements Op: the image is unchanged.
func (o MixUp) OutSpec(in Spec) (Spec, error) { return checkMix(o.Alpha, in) }

// OutSpec implements Op: the image is unchanged.
func (o CutMix) OutSpec(in Spec) (Spec, error) {
	if !(o.Switch >= 0 && o.Switch <= 1) {
		return in, fmt.Errorf("switch probability %v outside [0, 1]", o.Switch)
	}
	return checkMix(o.Alpha, in)
}

// String returns "mixup=ALPHA".
func (o MixUp) String() string { return "mixup=" + strconv.FormatFloat(o.Alpha, 'g', -1, 64) }

// String returns "cutmix=ALPHA", with ":SWITCH" when Switch is set.
func (o CutMix) String() string {
	s := "cutmix=" + strconv.FormatFloat(o.Alpha, 'g', -1, 64)
	if o.Switch != 0 {
		s += ":" + strconv.FormatFloat(o.Switch, 'g', -1, 64)
	}
	return s
}

// parseMix reads mixup=ALPHA and cutmix=ALPHA[:SWITCH].
func parseMix(name, arg string) (Op, error) {
	parts := strings.Split(arg, ":")
	if arg == "" || len(parts) > 2 || name == "mixup" && len(parts) > 1 {
		if name == "mixup" {
			return nil, fmt.Errorf("want mixup=ALPHA")
		}
		return nil, fmt.Errorf("want cutmix=ALPHA[:SWITCH]")
	}
	a, err := strconv.ParseFloat(parts[0], 64)
	if err != nil {
		return nil, fmt.Errorf("bad alpha %q", parts[0])
	}
	if name == "mixup" {
		return MixUp{Alpha: a}, nil
	}
	o := CutMix{Alpha: a}
	if len(parts) == 2 {
		if o.Switch, err = strconv.ParseFloat(parts[1], 64); err != nil {
			return nil, fmt.Errorf("bad switch probability %q", parts[1])
		}
	}
	return o, nil
}

// isBatchOp reports whether op (canonical) acts on whole batches.
func isBatchOp(op Op) bool {
	switch op.(type) {
	case MixUp, CutMix:
		return true
	}
	return false
}

// splitBatchOps separates a chain's trailing batch ops from its
// per-sample ops; a batch op anywhere but at the end, or twice, is an
// *OpError.
func splitBatchOps(ops []Op) (per, batch []Op, err error) {
	first := -1
	for i, op := range ops {
		c, cerr := canon(op)
		if cerr != nil || !isBatchOp(c) {
			if first >= 0 {
				return nil, nil, &OpError{Index: i, Op: c, Err: fmt.Errorf("follows %s: mixup and cutmix act on the finished batch, so they end the chain", ops[first])}
			}
			continue
		}
		if first < 0 {
			first = i
		}
		for _, b := range batch {
			_, bUp := b.(MixUp)
			if _, cUp := c.(MixUp); bUp == cUp { // there are two kinds
				return nil, nil, &OpError{Index: i, Op: c, Err: errText("only one mixup and one cutmix per pipeline")}
			}
		}
		batch = append(batch, c)
	}
	if first < 0 {
		return ops, nil, nil
	}
	return ops[:first], batch, nil
}

// withMix checks the batch ops over p's output and folds them into p's
// Mixer; first is the index of the first in the declared chain.
func (p *Pipeline) withMix(batch []Op, first int) (*Pipeline, error) {
	m := &Mixer{out: p.out, pCut: 0.5}
	for k, op := range batch {
		if _, err := op.OutSpec(p.out); err != nil {
			return nil, &OpError{Index: first + k, Op: op, Err: err}
		}
		switch o := op.(type) {
		case MixUp:
			m.up, m.upAlpha = true, o.Alpha
		case CutMix:
			m.cut, m.cutAlpha = true, o.Alpha
			if o.Switch != 0 {
				m.pCut = o.Switch
			}
		}
		p.ops = append(p.ops, op)
	}
	p.mix = m
	return p, nil
}

// Mixer is a chain's batch ops (mixup, cutmix) folded over its output:
// Draw picks a batch's mix from its key, Apply performs it in place.
// It is immutable and safe for concurrent use.
type Mixer struct {
	out               Spec
	up, cut           bool
	upAlpha, cutAlpha float64
	pCut              float64 // CutMix's share when both are declared
}

// Mixer returns the chain's batch ops, or nil when it has none.
func (p *Pipeline) Mixer() *Mixer { return p.mix }

// BatchOps returns a copy of the chain's batch ops (mixup, cutmix), the
// tail of Ops that the loader applies to whole batches.
func (p *Pipeline) BatchOps() []Op {
	var b []Op
	for _, op := range p.ops {
		if isBatchOp(op) {
			b = append(b, op)
		}
	}
	return b
}

// Out returns the spec of one sample the Mixer mixes.
func (m *Mixer) Out() Spec { return m.out }

// mixKey mixes (seed, epoch, rank, batch) into one key, apart from the
// per-sample keys of drawKey: the same generator with another seed
// offset, then the rank folded in as the others are.
func mixKey(seed uint64, epoch int64, rank int, batch int64) uint64 {
	k := drawKey(seed^0x3c6ef372fe94f82b, epoch, batch) // √5's fraction
	return mix64(k ^ mix64(uint64(int64(rank))+0xa54ff53a5f1d36f1))
}

// Streams of a batch's draws (rng.go's scheme, apart from the samples').
const (
	streamMixChoice = 64 + iota // mixup or cutmix, when both
	streamMixGammaX             // the Beta draw's two Gamma draws
	streamMixGammaY
	streamMixX // cutmix's box centre
	streamMixY
)

// Draw returns the mix of batch `batch` of `epoch` on rank `rank`: a pure
// function of (seed, epoch, rank, batch), never of workers or timing. λ
// is a float32 value (torch's Beta samples are float32); CutMix's box is
// torchvision's, and its λ is 1 - area/(H·W) of the clipped box.
func (m *Mixer) Draw(seed uint64, epoch int64, rank int, batch int64) sample.Mix {
	key := mixKey(seed, epoch, rank, batch)
	kind, alpha := sample.MixUp, m.upAlpha
	if m.cut && (!m.up || unit(key, streamMixChoice) < m.pCut) {
		kind, alpha = sample.CutMix, m.cutAlpha
	}
	lam := float64(float32(betaSym(key, alpha)))
	mx := sample.Mix{Kind: kind, Lambda: lam}
	if kind == sample.CutMix {
		mx.Box, mx.Lambda = cutBox(key, lam, m.out.H, m.out.W)
	}
	return mx
}

// cutBox is torchvision's CutMix box: a centre (r_x, r_y) uniform over the
// pixels, half-sides int(0.5·√(1-λ)·W) and ·H, clipped to the image; and
// λ adjusted to the clipped box's area.
func cutBox(key uint64, lam float64, h, w int) (sample.Box, float64) {
	rx := int(uniform(key, streamMixX, uint64(w)))
	ry := int(uniform(key, streamMixY, uint64(h)))
	r := 0.5 * math.Sqrt(1-lam)
	rw, rh := int(r*float64(w)), int(r*float64(h))
	x1, y1 := max(rx-rw, 0), max(ry-rh, 0)
	x2, y2 := min(rx+rw, w), min(ry+rh, h)
	box := sample.Box{X: int32(x1), Y: int32(y1), W: int32(x2 - x1), H: int32(y2 - y1)}
	return box, 1 - float64((x2-x1)*(y2-y1))/float64(w*h)
}

// check reports whether mx is a mix m could have drawn.
func (m *Mixer) check(mx sample.Mix) error {
	b := mx.Box
	ok := false
	switch mx.Kind {
	case sample.MixUp:
		ok = m.up && b == sample.Box{}
	case sample.CutMix:
		ok = m.cut && b.X >= 0 && b.Y >= 0 && b.W >= 0 && b.H >= 0 &&
			int(b.X)+int(b.W) <= m.out.W && int(b.Y)+int(b.H) <= m.out.H
	}
	if !ok || !(mx.Lambda >= 0 && mx.Lambda <= 1) {
		return errorf(ErrParams, "augment: mix %+v does not fit %v (mixup %v, cutmix %v)", mx, m.out, m.up, m.cut)
	}
	return nil
}

// Apply mixes the n samples of data (n·Out().Bytes() bytes back to back,
// little-endian, in Out's dtype and layout) in place, as mx says; tmp
// holds one sample (Out().Bytes() bytes) and is overwritten. Sample i is
// mixed with the original sample i-1, sample 0 with the original last
// one: the samples are done from the last down, and the last is first
// saved in tmp for sample 0. MixUp computes each element in float32 as
// torch does, x·λ + x_rolled·(1-λ), the factors float32, and rounds it
// once to the dtype; CutMix copies the box's elements. Apply allocates
// nothing.
func (m *Mixer) Apply(data []byte, n int, mx sample.Mix, tmp []byte) error {
	sz := m.out.Bytes()
	if n < 1 || len(data) < n*sz || len(tmp) < sz {
		return errorf(ErrBufferSize, "augment: mix of %d samples of %d bytes: data is %d bytes, tmp %d", n, sz, len(data), len(tmp))
	}
	if err := m.check(mx); err != nil {
		return err
	}
	at := func(i int) []byte { return data[i*sz : (i+1)*sz] }
	tmp = tmp[:sz]
	copy(tmp, at(n-1))
	for i := n - 1; i >= 0; i-- {
		partner := tmp
		if i > 0 {
			partner = at(i - 1)
		}
		if mx.Kind == sample.CutMix {
			m.paste(at(i), partner, mx.Box)
		} else {
			own, other := mx.Weights()
			blend(at(i), partner, m.out.DType, own, other)
		}
	}
	return nil
}

// paste copies box b of src over dst, one sample each.
func (m *Mixer) paste(dst, src []byte, b sample.Box) {
	o, es := m.out, m.out.DType.Size()
	x, y, w, h := int(b.X), int(b.Y), int(b.W), int(b.H)
	if w == 0 || h == 0 {
		return
	}
	if o.Layout == sample.HWC {
		for r := y; r < y+h; r++ {
			lo := (r*o.W + x) * o.C * es
			hi := lo + w*o.C*es
			copy(dst[lo:hi], src[lo:hi])
		}
		return
	}
	for c := range o.C {
		for r := y; r < y+h; r++ {
			lo := ((c*o.H+r)*o.W + x) * es
			hi := lo + w*es
			copy(dst[lo:hi], src[lo:hi])
		}
	}
}
