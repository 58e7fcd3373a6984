package augment

import (
	"fmt"

	"github.com/loaderd/loaderd/client/sample"
)

// A pipeline split at its value ops: the geometry (resize, crops, flip)
// makes uint8 pixels, and the value ops (totensor, normalize, a float out=)
// are a per-channel table from a pixel byte to the output element's bits,
// which whoever receives the pixels applies. Pixels plus table are exactly
// the full pipeline's output, a quarter of f32's bytes.

// PixelPipeline returns the pipeline that stops before p's value ops: the
// same input, geometry and draws for every (seed, epoch, index), with U8
// output in p's layout. Mapping its output through ValueTable gives p's
// output byte for byte. A chain that moves or mixes pixels after a value op
// cannot be split; the error (matching ErrInvalidOp) names the op.
func (p *Pipeline) PixelPipeline() (*Pipeline, error) {
	ops, err := pixelOps(p.ops)
	if err != nil {
		return nil, err
	}
	out := p.out
	out.DType = sample.U8
	q, err := NewPipeline(p.in, append(ops, Output{DType: sample.U8, Layout: out.Layout})...)
	if err != nil {
		return nil, fmt.Errorf("augment: pixel stage of %s: %w", p, err)
	}
	if q.out != out {
		return nil, errorf(ErrInvalidOp, "augment: pixel stage of %s makes %v, want %v", p, q.out, out)
	}
	return q, nil
}

// pixelOps drops the value ops of a chain. Only a flip may follow one: it
// moves whole pixels, so it commutes with per-pixel values; a crop pads with
// a pixel value and a resize mixes neighbours, so neither may.
func pixelOps(ops []Op) ([]Op, error) {
	var kept []Op
	first := -1 // the first op that changed values
	for i, op := range ops {
		switch o := op.(type) {
		case ToTensor, Normalize:
			if first < 0 {
				first = i
			}
			continue
		case Output:
			if first < 0 && o.DType.IsFloat() {
				first = i
			}
			continue // PixelPipeline appends the U8 one
		case RandomHorizontalFlip:
		case MixUp, CutMix:
			return nil, &OpError{Index: i, Op: op,
				Err: errText("mixes the finished batch in float, which uint8 pixels and a value table cannot express: the value ops cannot be left to the client")}
		case RandomErasing:
			return nil, &OpError{Index: i, Op: op,
				Err: errText("erases the finished tensor, which uint8 pixels and a value table cannot express: the value ops cannot be left to the client")}
		default:
			if first >= 0 {
				return nil, &OpError{Index: i, Op: op,
					Err: fmt.Errorf("follows %s, so the value ops cannot be left to the client (only flip may follow them)", ops[first])}
			}
		}
		kept = append(kept, op)
	}
	return kept, nil
}

// ValueTable returns p's value ops as a table and the type it yields (p's
// output dtype): for each output channel c, 256 elements, little-endian,
// channel 0's first, element v being what a pixel byte v of channel c
// becomes. For a U8 output it is the identity.
func (p *Pipeline) ValueTable() ([]byte, sample.DType) {
	k := p
	if p.sized != nil {
		k = p.sized.inner // the fused rest holds the tables
	}
	if k.photo != nil {
		k = k.photo.post // the value stage does
	}
	n := p.out.C * 256 * p.out.DType.Size()
	var all []byte
	switch p.out.DType.Size() { // the tables' memory is little-endian on any host
	case 1:
		all = asBytes[[3 * 256]byte](k.lut8)[:]
	case 2:
		all = asBytes[[3 * 256 * 2]byte](k.lut16)[:]
	case 4:
		all = asBytes[[3 * 256 * 4]byte](k.lut32)[:]
	}
	return append([]byte(nil), all[:n]...), p.out.DType
}
