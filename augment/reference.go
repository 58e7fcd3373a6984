package augment

import (
	"encoding/binary"
	"math"

	"github.com/loaderd/loaderd/client/sample"
)

// The oracle: each op as its own obvious function over a simple image type,
// composed in declared order. It exists to check the fused kernel and is
// slow (it allocates a new image per step).

// image is the oracle's image type: channel c of pixel (y, x) is
// Pix[(y*W+x)*C+c], whatever layout the bytes came in or go out in.
type image[T any] struct {
	H, W, C int
	Pix     []T
}

func newImage[T any](h, w, c int) image[T] {
	return image[T]{H: h, W: w, C: c, Pix: make([]T, h*w*c)}
}

func (m image[T]) at(y, x, c int) T     { return m.Pix[(y*m.W+x)*m.C+c] }
func (m image[T]) set(y, x, c int, v T) { m.Pix[(y*m.W+x)*m.C+c] = v }

// offset is where channel c of pixel (y, x) lies in a buffer of layout l.
func offset(l sample.Layout, h, w, c, y, x, k int) int {
	if l == sample.CHW {
		return (k*h+y)*w + x
	}
	return (y*w+x)*c + k
}

// decodeImage reads src, a u8 image of spec s (Transpose on the way in).
func decodeImage(src []byte, s Spec) image[uint8] {
	m := newImage[uint8](s.H, s.W, s.C)
	for y := range s.H {
		for x := range s.W {
			for k := range s.C {
				m.set(y, x, k, src[offset(s.Layout, s.H, s.W, s.C, y, x, k)])
			}
		}
	}
	return m
}

// padImage adds p pixels of fill on every side (torchvision's pad with a
// constant fill on a uint8 image).
func padImage(m image[uint8], p int, fill func(c int) uint8) image[uint8] {
	r := newImage[uint8](m.H+2*p, m.W+2*p, m.C)
	for y := range r.H {
		for x := range r.W {
			for k := range r.C {
				v := fill(k)
				if y >= p && y < p+m.H && x >= p && x < p+m.W {
					v = m.at(y-p, x-p, k)
				}
				r.set(y, x, k, v)
			}
		}
	}
	return r
}

func cropImage[T any](m image[T], top, left, h, w int) image[T] {
	r := newImage[T](h, w, m.C)
	for y := range h {
		for x := range w {
			for k := range m.C {
				r.set(y, x, k, m.at(top+y, left+x, k))
			}
		}
	}
	return r
}

func hflipImage[T any](m image[T]) image[T] {
	r := newImage[T](m.H, m.W, m.C)
	for y := range m.H {
		for x := range m.W {
			for k := range m.C {
				r.set(y, m.W-1-x, k, m.at(y, x, k))
			}
		}
	}
	return r
}

// toFloatImage is ToTensor's value step: float32(x)/255.
func toFloatImage(m image[uint8]) image[float32] {
	r := newImage[float32](m.H, m.W, m.C)
	for i, v := range m.Pix {
		r.Pix[i] = float32(v) / 255
	}
	return r
}

// normalizeImage is torchvision's tensor.sub_(mean).div_(std) in float32.
func normalizeImage(m image[float32], o Normalize) image[float32] {
	r := newImage[float32](m.H, m.W, m.C)
	for i, v := range m.Pix {
		mean, std := o.at(i % m.C)
		r.Pix[i] = (v - mean) / std
	}
	return r
}

// convert is one element's bytes in dtype d, little-endian.
func convert(dst []byte, d sample.DType, v float32) {
	switch d {
	case sample.F32:
		binary.LittleEndian.PutUint32(dst, math.Float32bits(v))
	case sample.F16:
		binary.LittleEndian.PutUint16(dst, sample.Float16(v))
	case sample.BF16:
		binary.LittleEndian.PutUint16(dst, sample.BFloat16(v))
	}
}

// encodeImage writes m as spec s (Convert, then Transpose on the way out).
func encodeImage[T uint8 | float32](dst []byte, m image[T], s Spec) {
	sz := s.DType.Size()
	for y := range m.H {
		for x := range m.W {
			for k := range m.C {
				o := offset(s.Layout, m.H, m.W, m.C, y, x, k) * sz
				switch v := any(m.at(y, x, k)).(type) {
				case uint8:
					dst[o] = v
				case float32:
					convert(dst[o:o+sz], s.DType, v)
				}
			}
		}
	}
}

// Reference computes what Apply computes by composing one simple function
// per op in declared order: decode the layout, pad, crop, flip, scale,
// normalise, convert, transpose. It is the test oracle for the fused kernel
// and allocates freely; use Apply for work.
func (p *Pipeline) Reference(dst, src []byte, prm sample.Params) error {
	if p.sized != nil {
		// The resampler is its own oracle's subject (the parity test
		// against Pillow); the rest of the chain is checked here.
		if p.Variable() || len(src) != p.in.Bytes() {
			return errorf(ErrBufferSize, "augment: Reference needs a fixed-size input of %v", p.in)
		}
		pl, err := p.sized.geo.planFor(p.in.H, p.in.W, prm.Box)
		if err != nil {
			return err
		}
		var sc Scratch
		mid := make([]byte, p.sized.inner.in.Bytes())
		sc.resample(mid, src, p.in.H, p.in.W, p.in.C, pl)
		return p.sized.inner.Reference(dst, mid, prm)
	}
	if p.photo != nil {
		return p.photo.reference(p, dst, src, prm)
	}
	if len(src) != p.in.Bytes() || len(dst) < p.out.Bytes() {
		return p.checkBuffers(dst, src)
	}
	if _, err := p.geom(prm); err != nil {
		return err
	}
	m8 := decodeImage(src, p.in)
	var mf image[float32]
	isFloat := false
	for _, op := range p.ops {
		switch o := op.(type) {
		case RandomCrop:
			m8 = cropImage(padImage(m8, o.Padding, o.fillFor), int(prm.Top), int(prm.Left), o.Size, o.Size)
		case RandomHorizontalFlip:
			if prm.Flip && isFloat {
				mf = hflipImage(mf)
			} else if prm.Flip {
				m8 = hflipImage(m8)
			}
		case ToTensor:
			mf, isFloat = toFloatImage(m8), true
		case Normalize:
			mf = normalizeImage(mf, o)
		case Output:
			if o.DType.IsFloat() && !isFloat {
				mf, isFloat = toFloatImage(m8), true
			}
		}
	}
	if isFloat {
		encodeImage(dst, mf, p.out)
	} else {
		encodeImage(dst, m8, p.out)
	}
	return nil
}
