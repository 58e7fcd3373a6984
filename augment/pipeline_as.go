package augment

import "github.com/loaderd/loaderd/client/sample"

// NewPipelineAs builds ops over in, as NewPipeline, with the output dtype
// and layout of want, whose zero fields keep the chain's: the daemon's
// rule for a stream's chain and the dtype and layout its client asks for.
//
// A zero want folds the chain once, as NewPipeline(in, ops...) does.
// Otherwise the chain is folded as given (its errors are NewPipeline's),
// then again with its Output ops replaced by one final Output of want's
// dtype and layout, a zero field taking the chain's output's:
//
//   - A chain without an Output op takes want as it is.
//   - strict says the chain was written by whoever asks for want: then an
//     Output op in it must agree with want's non-zero fields, else the
//     error names the disagreement. Without strict (a default chain), want
//     replaces the chain's Output ops.
//   - A U8 want on a chain whose output is float drops its ToTensor and
//     Normalize ops: the asker wants raw pixels.
//
// An unknown dtype or layout in want, or a disagreement, is an error
// matching ErrInvalidOp.
func NewPipelineAs(in Spec, ops []Op, want Output, strict bool) (*Pipeline, error) {
	if want == (Output{}) {
		return NewPipeline(in, ops...)
	}
	folded, err := NewPipeline(in, ops...)
	if err != nil {
		return nil, err
	}
	ops = folded.Ops() // canonical values
	have := folded.Out()
	out := Output{DType: have.DType, Layout: have.Layout}
	fixed := strict && hasOutput(ops)
	if want.DType != 0 {
		if want.DType.Size() == 0 {
			return nil, errorf(ErrInvalidOp, "augment: unknown dtype %d", want.DType)
		}
		if fixed && want.DType != out.DType {
			return nil, errorf(ErrInvalidOp, "augment: dtype %s disagrees with the augment spec's %s", want.DType, out.DType)
		}
		out.DType = want.DType
	}
	if want.Layout != 0 {
		if want.Layout != sample.CHW && want.Layout != sample.HWC {
			return nil, errorf(ErrInvalidOp, "augment: unknown layout %d", want.Layout)
		}
		if fixed && want.Layout != out.Layout {
			return nil, errorf(ErrInvalidOp, "augment: layout %s disagrees with the augment spec's %s", want.Layout, out.Layout)
		}
		out.Layout = want.Layout
	}
	raw := out.DType == sample.U8 && have.DType.IsFloat()
	var kept, last []Op
	for _, op := range ops {
		switch op.(type) {
		case Output:
			continue
		case RandomErasing, MixUp, CutMix: // act on the finished tensor or batch, after out
			last = append(last, op)
			continue
		case ToTensor, Normalize:
			if raw {
				continue
			}
		}
		kept = append(kept, op)
	}
	return NewPipeline(in, append(append(kept, out), last...)...)
}

func hasOutput(ops []Op) bool {
	for _, op := range ops {
		if _, ok := op.(Output); ok {
			return true
		}
	}
	return false
}
