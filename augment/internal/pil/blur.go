package pil

import "math"

// maxKernel bounds the Gaussian kernel size so that its taps fit on the
// stack.
const maxKernel = 255

// chunk is the number of row elements GaussianBlur accumulates at once.
const chunk = 512

// BlurScratch returns the number of float32s GaussianBlur needs for src.
func BlurScratch(src Image) int { return src.H * src.W * src.C }

// GaussianBlur performs F.gaussian_blur with kernel sizes kernel = [kx, ky]
// (odd, at most 255) and standard deviations sigma = [sx, sy] (> 0),
// using scratch (at least BlurScratch(src) floats).
//
// torchvision converts the PIL image to a float32 tensor, convolves it
// with the outer product of two float32 Gaussian kernels over a
// reflect-padded border, rounds half to even and casts back. The kernels
// here are computed the same way in float32, but the convolution is
// separable, horizontal then vertical, which sums in another order than
// PyTorch's conv2d: a value within about 1e-4 of a half can round the
// other way, so a rare byte differs by 1. torchvision refuses a padding
// (half the kernel) not smaller than the image; here the border keeps
// reflecting.
func GaussianBlur(dst, src Image, kernel [2]int, sigma [2]float64, scratch []float32) {
	check(dst, src, 0)
	for i := range 2 {
		if kernel[i] <= 0 || kernel[i]%2 == 0 || kernel[i] > maxKernel {
			panic("pil: gaussian kernel size must be odd, in [1, 255]")
		}
		if !(sigma[i] > 0) {
			panic("pil: gaussian sigma must be positive")
		}
	}
	if len(scratch) < BlurScratch(src) {
		panic("pil: blur scratch shorter than BlurScratch")
	}
	h, w, c := src.H, src.W, src.C
	if h == 0 || w == 0 {
		return
	}
	var kx, ky [maxKernel]float32
	gaussian(kx[:kernel[0]], sigma[0])
	gaussian(ky[:kernel[1]], sigma[1])
	rx, ry := kernel[0]/2, kernel[1]/2
	s := src.Pix[:src.n()]
	tmp := scratch[:src.n()]
	stride := w * c

	// Both passes accumulate a chunk of a row at a time, one tap after
	// another, so that the inner loops run over contiguous slices.
	var acc [chunk]float64

	// Horizontal pass into tmp. Interior samples index the row directly;
	// only the kernel's half-width at each end reflects.
	taps := kx[:kernel[0]]
	lo, hi := min(rx, w)*c, max(w-rx, 0)*c
	for y := range h {
		row := s[y*stride : (y+1)*stride]
		out := tmp[y*stride : (y+1)*stride]
		for i := range stride {
			if i >= lo && i < hi {
				continue
			}
			x, k := i/c, i%c
			var sum float64
			for j, wt := range taps {
				sum += float64(wt) * float64(row[reflect(x+j-rx, w)*c+k])
			}
			out[i] = float32(sum)
		}
		for i0 := lo; i0 < hi; i0 += chunk {
			n := min(chunk, hi-i0)
			a := acc[:n]
			clear(a)
			for j, wt := range taps {
				off := i0 + (j-rx)*c
				src := row[off : off+n]
				a := a[:len(src)] // lets the compiler drop bounds checks
				fw := float64(wt)
				for t, v := range src {
					a[t] += fw * float64(v)
				}
			}
			for t, v := range a {
				out[i0+t] = float32(v)
			}
		}
	}

	// Vertical pass from tmp, with the source rows of each output row
	// looked up once.
	d := dst.Pix[:dst.n()]
	taps = ky[:kernel[1]]
	var rows [maxKernel]int
	for y := range h {
		for j := range taps {
			rows[j] = reflect(y+j-ry, h) * stride
		}
		out := d[y*stride : (y+1)*stride]
		for i0 := 0; i0 < stride; i0 += chunk {
			n := min(chunk, stride-i0)
			a := acc[:n]
			clear(a)
			for j, wt := range taps {
				off := rows[j] + i0
				src := tmp[off : off+n]
				a := a[:len(src)]
				fw := float64(wt)
				for t, v := range src {
					a[t] += fw * float64(v)
				}
			}
			for t, v := range a {
				out[i0+t] = byte(min(max(math.RoundToEven(v), 0), 255))
			}
		}
	}
}

// gaussian fills k with torchvision's _get_gaussian_kernel1d in float32:
// exp(-0.5*(x/sigma)^2) at the integer offsets x, normalised by its sum.
func gaussian(k []float32, sigma float64) {
	half := float32(len(k)-1) * 0.5
	s := float32(sigma)
	var sum float32
	for i := range k {
		x := (float32(i) - half) / s
		k[i] = float32(math.Exp(float64(-0.5 * float32(x*x))))
		sum += k[i]
	}
	for i := range k {
		k[i] /= sum
	}
}

// reflect maps an index outside [0, n) back inside by mirroring about the
// edge pixels, as torch's reflect padding does.
func reflect(i, n int) int {
	if n == 1 {
		return 0
	}
	for i < 0 || i >= n {
		if i < 0 {
			i = -i
		}
		if i >= n {
			i = 2*(n-1) - i
		}
	}
	return i
}
