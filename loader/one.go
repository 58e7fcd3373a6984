package loader

import (
	"fmt"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
)

// One is a sample read alone, outside any stream (the daemon's GetSamples,
// a map-style dataset's ds[i]).
type One struct {
	Label  int32
	Shape  []int // of Data: the pipeline's Out().Shape(), or H, W, C of a raw decode
	Data   []byte
	Params sample.Params // the pipeline's draws; zero without one
}

// Reader reads samples of one source one at a time, with the buffers a
// stream's worker has: the same reads, decodes and augmentation as a
// stream, so that a sample read here equals a stream's byte for byte. It
// is not safe for concurrent use; its scratch is ScratchBytes long.
type Reader struct {
	src     Source
	sized   *sizedReader // when src's images vary in size
	scratch []byte
	aug     augment.Scratch
}

// NewReader returns a Reader of src. Its scratch is allocated on the
// first Read, so a caller may budget ScratchBytes first.
func NewReader(src Source) *Reader {
	r := &Reader{src: src}
	if ss, ok := As[SizedSource](src); ok {
		r.sized = &sizedReader{SizedSource: ss}
	}
	return r
}

// ScratchBytes is the scratch a Read needs: a worker's.
func (r *Reader) ScratchBytes() int64 {
	if r.sized != nil {
		return r.sized.MaxPixels() * int64(r.src.Spec().C)
	}
	return int64(r.src.Spec().Bytes())
}

// Read reads sample i and, with pipe, augments it as a stream with seed
// augments dataset index i in epoch: params drawn for (seed, epoch, i),
// for the image's own size when it varies. Without pipe, which only a
// source of varying size takes (a fixed-size one is given a pipeline of
// its output op alone), the sample is the whole image decoded at scale 1,
// U8 HWC. alloc gives the n bytes of the output, so that the caller can
// count them (in a memory budget) before they are allocated; its error
// is returned as is. Faults reading a mapped file are errors naming the
// file (see guarded), as in a stream; there is no skip policy: the caller
// asked for this sample.
func (r *Reader) Read(i int64, pipe *augment.Pipeline, seed uint64, epoch int64, alloc func(n int) ([]byte, error)) (One, error) {
	if pipe == nil && r.sized == nil {
		return One{}, fmt.Errorf("loader: %s: a fixed-size source is read through a pipeline", r.src)
	}
	if int64(len(r.scratch)) < r.ScratchBytes() {
		r.scratch = make([]byte, r.ScratchBytes())
	}
	var src Source = r.src
	if r.sized != nil {
		r.sized.want.plan(pipe, seed, epoch, i)
		src = r.sized
	}
	label, pix, err := guarded{src}.Sample(i, r.scratch)
	if err != nil {
		return One{}, err
	}
	var one One
	if r.sized != nil && pipe == nil {
		d := r.sized.dec
		if !d.Whole() || d.Scale > 1 || len(pix) != d.H*d.W*r.src.Spec().C {
			return One{}, fmt.Errorf("loader: %s: sample %d: decoded %d bytes of a %dx%d image at 1/%d, want it whole",
				r.src, i, len(pix), d.W, d.H, d.Scale)
		}
		one.Shape = []int{d.H, d.W, r.src.Spec().C}
		if one.Data, err = alloc(len(pix)); err != nil {
			return One{}, err
		}
		copy(one.Data, pix)
		one.Label = label
		return one, nil
	}
	one.Shape = pipe.Out().Shape()
	if one.Data, err = alloc(pipe.Out().Bytes()); err != nil {
		return One{}, err
	}
	if r.sized != nil {
		d := r.sized.dec
		one.Params = r.sized.want.params(d.H, d.W)
		err = pipe.ApplyDecoded(one.Data, pix, d.H, d.W, d.Scale, d.Box, one.Params, &r.aug)
	} else {
		one.Params = pipe.Draw(seed, epoch, i)
		err = pipe.Apply(one.Data, pix, one.Params)
	}
	if err != nil {
		return One{}, err
	}
	one.Label = label
	return one, nil
}
