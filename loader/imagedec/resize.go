package imagedec

import "math"

// resizer stretches RGB HWC images to a fixed size with a bilinear
// (triangle) filter widened by the scale when shrinking, so that every
// source pixel contributes: the algorithm of PIL's Image.resize with
// BILINEAR (and torchvision's Resize on PIL images), in float32 rather
// than PIL's fixed point, so values may differ from PIL's by one. Two
// separable passes through a uint8 intermediate, as PIL does. The weights
// are kept for the last (in, out) sizes seen, since a dataset's images
// usually share a few sizes. Not safe for concurrent use.
type resizer struct {
	tmp    []byte
	hw, vw axisWeights
}

type axisWeights struct {
	in, out int
	start   []int       // first source index of each output index
	w       [][]float32 // its weights, summing to 1
}

func (a *axisWeights) prepare(in, out int) {
	if a.in == in && a.out == out {
		return
	}
	a.in, a.out = in, out
	a.start, a.w = a.start[:0], a.w[:0]
	scale := float64(in) / float64(out)
	fscale := max(scale, 1)
	support := fscale // the triangle's support is 1, widened when shrinking
	for o := range out {
		center := (float64(o) + 0.5) * scale
		lo := max(int(center-support+0.5), 0)
		hi := min(int(center+support+0.5), in)
		ws := make([]float32, 0, hi-lo)
		var total float64
		for x := lo; x < hi; x++ {
			v := max(0, 1-math.Abs((float64(x)-center+0.5)/fscale))
			ws = append(ws, float32(v))
			total += v
		}
		for i := range ws {
			ws[i] = float32(float64(ws[i]) / total)
		}
		a.start, a.w = append(a.start, lo), append(a.w, ws)
	}
}

func round8(v float32) uint8 { return uint8(min(max(v+0.5, 0), 255)) }

// resize writes src (ih×iw×3) into dst (oh×ow×3).
func (r *resizer) resize(dst, src []byte, ih, iw, oh, ow int) {
	r.hw.prepare(iw, ow)
	r.vw.prepare(ih, oh)
	if cap(r.tmp) < ih*ow*3 {
		r.tmp = make([]byte, ih*ow*3)
	}
	tmp := r.tmp[:ih*ow*3]
	for y := range ih { // across
		in, out := src[y*iw*3:][:iw*3], tmp[y*ow*3:][:ow*3]
		for x := range ow {
			var s0, s1, s2 float32
			for k, w := range r.hw.w[x] {
				p := in[(r.hw.start[x]+k)*3:][:3:3]
				s0 += w * float32(p[0])
				s1 += w * float32(p[1])
				s2 += w * float32(p[2])
			}
			out[3*x], out[3*x+1], out[3*x+2] = round8(s0), round8(s1), round8(s2)
		}
	}
	for y := range oh { // down
		out := dst[y*ow*3:][:ow*3]
		for i := range out {
			var s float32
			for k, w := range r.vw.w[y] {
				s += w * float32(tmp[(r.vw.start[y]+k)*ow*3+i])
			}
			out[i] = round8(s)
		}
	}
}
