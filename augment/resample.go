package augment

import "math"

// The geometric stage's resampler is Pillow's ImagingResample with the
// BILINEAR filter, which torchvision's resize on PIL images calls: a
// triangle filter whose support is widened by the scale when shrinking
// (the antialias), coefficients computed in float64 exactly as Pillow's
// precompute_coeffs and rounded to 22-bit fixed point as its
// normalize_coeffs_8bpc, then integer sums with Pillow's rounding and
// clipping; horizontal pass first through a u8 intermediate. The same
// operations in the same order give Pillow's bytes exactly (the parity
// test holds it to that). Only the window's rows and columns of the
// resized image are computed: resize-then-crop without the waste.

const precisionBits = 32 - 8 - 2 // Pillow's PRECISION_BITS

// coeffs are one axis' fixed-point weights for output indices lo..lo+n-1.
type coeffs struct {
	ksize int
	start []int   // first input index of each output index
	n     []int   // number of taps
	k     []int32 // ksize weights per output index
	pre   []float64
}

// prepare computes the weights of outputs [lo, lo+n) when the span
// [in0, in1) of an axis of inSize pixels is resampled to outSize (Pillow's
// precompute_coeffs; its box is float32, hence the argument types). It
// reuses the slices: no allocation once they are large enough.
func (c *coeffs) prepare(inSize int, in0, in1 float32, outSize, lo, n int) {
	scale := float64(in1-in0) / float64(outSize)
	filterscale := max(scale, 1)
	support := 1 * filterscale
	c.ksize = int(math.Ceil(support))*2 + 1
	c.start, c.n = grow(c.start, n), grow(c.n, n)
	c.k = grow(c.k, n*c.ksize)
	ss := 1.0 / filterscale
	for i := range n {
		center := float64(in0) + float64(float64(lo+i)+0.5)*scale
		xmin := max(int(center-support+0.5), 0)
		xmax := min(int(center+support+0.5), inSize) - xmin
		c.pre = grow(c.pre, xmax)
		w := c.pre
		ww := 0.0
		for x := range xmax {
			v := bilinear(float64(float64(x+xmin)-center+0.5) * ss)
			w[x] = v
			ww += v
		}
		k := c.k[i*c.ksize : (i+1)*c.ksize]
		clear(k)
		for x, v := range w {
			if ww != 0 {
				v /= ww
			}
			if v < 0 {
				k[x] = int32(-0.5 + v*(1<<precisionBits))
			} else {
				k[x] = int32(0.5 + v*(1<<precisionBits))
			}
		}
		c.start[i], c.n[i] = xmin, xmax
	}
}

func bilinear(x float64) float64 {
	x = math.Abs(x)
	if x < 1 {
		return 1 - x
	}
	return 0
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

const half = 1 << (precisionBits - 1) // Pillow's rounding offset

// horizontal3 is the horizontal pass over one row of RGB pixels: the three
// channels' sums in one sweep of the taps.
func horizontal3(out, in []byte, h *coeffs, nx int) {
	for x := range nx {
		k := h.k[x*h.ksize:][:h.n[x]]
		px := in[h.start[x]*3:][:len(k)*3]
		// Channels 0 and 2 share a uint64, one per 32-bit lane: the
		// weights are never negative and a lane's sum stays under 2^31,
		// so no carry crosses lanes and each lane is Pillow's int32 sum.
		a02, a1 := uint64(half)|half<<32, uint64(half)
		for t, kv := range k {
			p := px[t*3 : t*3+3 : t*3+3]
			a02 += (uint64(p[0]) | uint64(p[2])<<32) * uint64(kv)
			a1 += uint64(p[1]) * uint64(kv)
		}
		o := out[x*3 : x*3+3 : x*3+3]
		o[0], o[1], o[2] = clip8(int32(uint32(a02))), clip8(int32(a1)), clip8(int32(a02>>32))
	}
}

// horizontal3x2 is horizontal3 over two rows at once.
func horizontal3x2(out0, out1, in0, in1 []byte, h *coeffs, nx int) {
	for x := range nx {
		k := h.k[x*h.ksize:][:h.n[x]]
		s := h.start[x] * 3
		p0, p1 := in0[s:][:len(k)*3], in1[s:][:len(k)*3]
		b02, b1 := uint64(half)|half<<32, uint64(half)
		c02, c1 := b02, b1
		for t, kv := range k {
			q0, q1 := p0[t*3:t*3+3:t*3+3], p1[t*3:t*3+3:t*3+3]
			kw := uint64(kv)
			b02 += (uint64(q0[0]) | uint64(q0[2])<<32) * kw
			b1 += uint64(q0[1]) * kw
			c02 += (uint64(q1[0]) | uint64(q1[2])<<32) * kw
			c1 += uint64(q1[1]) * kw
		}
		o0, o1 := out0[x*3:x*3+3:x*3+3], out1[x*3:x*3+3:x*3+3]
		o0[0], o0[1], o0[2] = clip8(int32(uint32(b02))), clip8(int32(b1)), clip8(int32(b02>>32))
		o1[0], o1[1], o1[2] = clip8(int32(uint32(c02))), clip8(int32(c1)), clip8(int32(c02>>32))
	}
}

// clip8 is Pillow's: the fixed-point sum back to a byte.
func clip8(v int32) uint8 {
	if v >= 1<<precisionBits<<8 {
		return 255
	}
	if v <= 0 {
		return 0
	}
	return uint8(v >> precisionBits)
}

// Scratch holds one worker's buffers for a pipeline whose chain opens
// with a geometric op: the fixed-size image between the two stages, the
// resampler's intermediate and its weights; and for the photometric ops,
// their two images and the blur's floats. Not safe for concurrent use;
// the zero value is ready, and after the first images of a dataset the
// stage allocates nothing.
type Scratch struct {
	mid, tmp []byte
	acc      []uint64
	h, v     coeffs
	hs       simdTable
	photo    [2][]byte // the photometric ops' two images
	blur     []float32 // gaussian_blur's
}

// resample runs plan p over src, an h×w×c HWC image, into dst, p.oh×p.ow×c.
func (s *Scratch) resample(dst, src []byte, h, w, c int, p plan) {
	bw, bh := int(p.box.W), int(p.box.H)
	// Pillow resamples the cropped image: its edges clamp the filter.
	src = src[(int(p.box.Y)*w+int(p.box.X))*c:]
	s.resampleBox(dst, src, w, bw, bh, c, p, 0, 0, float32(bw), float32(bh))
}

// resampleBox resamples the span [x0, x1)×[y0, y1) of src, an image of
// iw×ih pixels (rows of stride w pixels), as Pillow's resize with a box.
func (s *Scratch) resampleBox(dst, src []byte, w, iw, ih, c int, p plan, x0f, y0f, x1f, y1f float32) {
	// The window's columns and rows that fall inside the resized image;
	// the rest is the zero padding of a centre crop.
	x0, x1 := max(p.wx, 0), min(p.wx+p.ow, p.rw)
	y0, y1 := max(p.wy, 0), min(p.wy+p.oh, p.rh)
	if x1-x0 < p.ow || y1-y0 < p.oh { // padded; a resized crop never is
		clear(dst[:p.oh*p.ow*c])
	}
	if x1 <= x0 || y1 <= y0 {
		return
	}
	nx, ny := x1-x0, y1-y0
	s.h.prepare(iw, x0f, x1f, p.rw, x0, nx)
	s.v.prepare(ih, y0f, y1f, p.rh, y0, ny)
	// Input rows the vertical pass reads, relative to the box.
	first := s.v.start[0]
	last := s.v.start[ny-1] + s.v.n[ny-1]
	rows := last - first
	// Four spare bytes: the SIMD pass writes a whole word per pixel.
	s.tmp = grow(s.tmp, rows*nx*c+4)
	s.horizontal(s.tmp, src[first*w*c:], w*c, iw, c, rows, nx)
	// The window's rows: the zero padding around them stays.
	ow, n := p.ow*c, nx*c
	s.vertical(dst[(y0-p.wy)*ow+(x0-p.wx)*c:], ow, s.tmp[:rows*n], n, first, ny)
}

// horizontal is Pillow's ImagingResampleHorizontal_8bpc over rows rows of
// src (stride bytes apart, iw pixels of c channels each) into tmp, nx
// pixels a row and four spare bytes after the last.
func (s *Scratch) horizontal(tmp, src []byte, stride, iw, c, rows, nx int) {
	r0 := 0
	if c == 3 && haveSIMD {
		t := &s.hs
		t.build(&s.h, nx)
		// Rows whose reads all lie inside src; the last rows may not. The
		// pixel written after a row's last one is the next row's first
		// (or tmp's spare bytes): rows go in order, two at a time.
		for ; t.pairs > 0 && r0+1 < rows && (r0+1)*stride+t.reach <= len(src); r0 += 2 {
			hpass3x2AVX2(&tmp[r0*nx*3], &src[r0*stride], nx*3, stride, nx, &t.start[0], t.pairs, &t.w[0])
		}
		for ; t.pairs > 0 && r0 < rows && r0*stride+t.reach <= len(src); r0++ {
			hpass3AVX2(&tmp[r0*nx*3], &src[r0*stride], nx, &t.start[0], t.pairs, &t.w[0])
		}
	}
	if c == 3 { // two rows at a time: the weights are loaded once for both
		for ; r0+1 < rows; r0 += 2 {
			in0 := src[r0*stride:][:iw*3]
			in1 := src[(r0+1)*stride:][:iw*3]
			horizontal3x2(tmp[r0*nx*3:][:nx*3], tmp[(r0+1)*nx*3:][:nx*3], in0, in1, &s.h, nx)
		}
	}
	for r := r0; r < rows; r++ {
		in := src[r*stride:][:iw*c]
		out := tmp[r*nx*c:][:nx*c]
		if c == 3 {
			horizontal3(out, in, &s.h, nx)
			continue
		}
		for i := range nx {
			k := s.h.k[i*s.h.ksize:][:s.h.n[i]]
			px := in[s.h.start[i]*c:][:len(k)*c]
			for ch := range c {
				acc := int32(half)
				for t, kv := range k {
					acc += int32(px[t*c+ch]) * kv
				}
				out[i*c+ch] = clip8(acc)
			}
		}
	}
}

// vertical is Pillow's ImagingResampleVertical_8bpc: ny output rows of n
// bytes into dst (rows dstride apart) from tmp (rows of n bytes, the
// first being input row first).
func (s *Scratch) vertical(dst []byte, dstride int, tmp []byte, n, first, ny int) {
	if haveSIMD {
		n32 := n &^ 31
		for j := range ny {
			k := s.v.k[j*s.v.ksize:][:s.v.n[j]]
			base := s.v.start[j] - first
			out := dst[j*dstride:][:n]
			if n32 > 0 {
				_ = tmp[(base+len(k))*n-1] // the rows the assembly reads
				vpassAVX2(&out[0], &tmp[base*n], n, n32, &s.v.k[j*s.v.ksize], len(k))
			}
			for i := n32; i < n; i++ {
				acc := int32(half)
				for t, kv := range k {
					acc += int32(tmp[(base+t)*n+i]) * kv
				}
				out[i] = clip8(acc)
			}
		}
		return
	}
	// The same sums, taken a whole row at a time so that the intermediate
	// is read in order; two bytes per uint64 accumulator, as in
	// horizontal3.
	s.acc = grow(s.acc, (n+1)/2)
	acc := s.acc
	for j := range ny {
		k := s.v.k[j*s.v.ksize:][:s.v.n[j]]
		base := s.v.start[j] - first
		for i := range acc {
			acc[i] = half | half<<32
		}
		for t, kv := range k {
			row := tmp[(base+t)*n:][:n]
			kw := uint64(kv)
			a := acc[:len(row)/2]
			for i := range a {
				a[i] += (uint64(row[2*i]) | uint64(row[2*i+1])<<32) * kw
			}
			if n%2 == 1 {
				acc[n/2] += uint64(row[n-1]) * kw
			}
		}
		out := dst[j*dstride:][:n]
		for i := 0; i+1 < len(out); i += 2 {
			v := acc[i/2]
			out[i], out[i+1] = clip8(int32(uint32(v))), clip8(int32(v>>32))
		}
		if n%2 == 1 {
			out[n-1] = clip8(int32(uint32(acc[n/2])))
		}
	}
}

// simdTable is the horizontal weights laid out for hpass3AVX2: for each
// output pixel its first input pixel and pairs tap pairs of 8 weights
// (k, k, k, k', k', k', 0, 0), one per byte of the two RGB pixels and two
// spare bytes that the pair's 8-byte load reads; pixels with fewer taps
// get zero weights.
type simdTable struct {
	start []int32
	w     []int32
	pairs int
	reach int // bytes past a row's start that the pass reads
}

func (t *simdTable) build(c *coeffs, nx int) {
	t.pairs = 0
	for _, n := range c.n[:nx] {
		t.pairs = max(t.pairs, (n+1)/2)
	}
	stride := t.pairs * 8
	t.start = grow(t.start, nx)
	t.w = grow(t.w, nx*stride)
	clear(t.w)
	t.reach = 0
	for x := range nx {
		w := t.w[x*stride:][:stride]
		for i, kv := range c.k[x*c.ksize:][:c.n[x]] {
			j := i/2*8 + i%2*3
			w[j], w[j+1], w[j+2] = kv, kv, kv
		}
		t.start[x] = int32(c.start[x])
		t.reach = max(t.reach, 3*(c.start[x]+2*(t.pairs-1))+8)
	}
}
