package client

import (
	"time"

	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/client/wire"
)

// Batch is one received batch. Data, and the slices beside it, stay valid
// until Release.
type Batch struct {
	Seq     uint64 // position in this Stream, from 0, across reconnects
	Epoch   int64
	Index   int64 // batch index within the epoch (counted from Offset)
	Offset  int64 // the epoch's elastic-resume offset (sampler.Position.Offset); 0 but in a resumed start epoch
	Indices []int64
	Labels  []int32
	Params  []sample.Params
	DType   sample.DType
	Layout  sample.Layout
	Shape   []int // N then one sample's dimensions in layout order
	Data    []byte

	s         *Stream
	buf       []byte     // ring slot (inline transport)
	w         wire.Batch // what the decoder wrote; the fields above are views of it
	gen       int        // stream generation it arrived on
	serverSeq uint64
	held      bool
	wait      time.Duration // how long Next blocked for it; sent on its ack
	m         *member       // of a pool: the daemon that made it
	mgen      int           // and its stream, which the ack goes to
	mix       sample.Mix    // the batch ops' record (batch_mix streams)
}

// Daemon returns the address of the daemon that made the batch: one of a
// pool's, or "" for a stream on one daemon.
func (b *Batch) Daemon() string {
	if b.m == nil {
		return ""
	}
	return b.m.addr
}

// Release acknowledges the batch: its buffer returns to the ring and the
// daemon may send (or, over shared memory, reuse) another.
func (b *Batch) Release() error { return b.s.release(b) }

// Stats are a stream's counters.
type Stats struct {
	Batches, Images, Bytes int64
	Wait                   time.Duration // time callers spent blocked in Next
	Elapsed                time.Duration // since the stream opened
	Reconnects             int
}

// fill sets b's fields from what the decoder wrote (b.w), but Data.
func (b *Batch) fill() {
	w := &b.w
	b.Epoch, b.Index, b.Indices, b.Labels = w.Epoch, w.Index, w.Indices, w.Labels
	b.DType, b.Layout = sample.DType(w.DType), sample.Layout(w.Layout)
	b.Shape = b.Shape[:0]
	for _, d := range w.Shape {
		b.Shape = append(b.Shape, int(d))
	}
	b.Params = paramsFrom(b.Params[:0], &w.Params)
	b.mix = sample.Mix{}
	if m := &w.Mix; w.HasMix {
		b.mix = sample.Mix{Kind: sample.MixKind(m.Kind), Lambda: m.Lam,
			Box: sample.Box{X: m.BoxLeft, Y: m.BoxTop, W: m.BoxWidth, H: m.BoxHeight}}
	}
}

// paramsFrom appends to ps the draws of p, as loader.proto's
// AugmentParams lays them out: a Batch's, and GetSamples'.
func paramsFrom(ps []sample.Params, p *wire.Params) []sample.Params {
	if len(p.Height) == 0 && len(p.Width) == 0 {
		for i := range min(len(p.Top), len(p.Left), len(p.Flip)) {
			ps = append(ps, sample.Params{Top: p.Top[i], Left: p.Left[i], Flip: p.Flip[i]})
		}
	} else { // a resampling pipeline: (top, left, height, width) is the box
		for i := range min(len(p.Top), len(p.Left), len(p.Flip), len(p.Height), len(p.Width)) {
			ps = append(ps, sample.Params{Flip: p.Flip[i],
				Box: sample.Box{X: p.Left[i], Y: p.Top[i], W: p.Width[i], H: p.Height[i]}})
		}
	}
	photoParams(ps, p)
	return ps
}

// photoParams fills the photometric and erasing draws of ps from p,
// where the daemon sent them (loader.proto's AugmentParams); fields that
// are short are left zero rather than trusted.
func photoParams(ps []sample.Params, p *wire.Params) {
	op := 0 // the next of p.Op and p.Magnitude
	for i := range ps {
		ph, er := &ps[i].Photo, &ps[i].Erase
		if len(p.JitterOrder) >= 4*(i+1) && len(p.Jitter) >= 4*(i+1) {
			for k := range 4 {
				ph.JitterOrder[k], ph.Jitter[k] = uint8(p.JitterOrder[4*i+k]), p.Jitter[4*i+k]
			}
		}
		if i < len(p.Gray) {
			ph.Gray = p.Gray[i]
		}
		if i < len(p.Sigma) {
			ph.Sigma = p.Sigma[i]
		}
		if i < len(p.NumOps) {
			n := int(p.NumOps[i])
			for j := range n {
				if op+j < len(p.Op) && op+j < len(p.Magnitude) && j < len(ph.Ops) {
					ph.Ops[j] = sample.PolicyOp{Op: sample.AugOp(p.Op[op+j]), Magnitude: p.Magnitude[op+j]}
					ph.NumOps++
				}
			}
			op += n
		}
		if i < len(p.Erased) && i < len(p.EraseTop) && i < len(p.EraseLeft) && i < len(p.EraseHeight) && i < len(p.EraseWidth) {
			er.Applied = p.Erased[i]
			er.Box = sample.Box{X: p.EraseLeft[i], Y: p.EraseTop[i], W: p.EraseWidth[i], H: p.EraseHeight[i]}
			if i < len(p.EraseNoise) {
				er.Noise = p.EraseNoise[i]
			}
		}
	}
}
