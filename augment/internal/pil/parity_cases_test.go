package pil

import (
	"fmt"
	"math/rand/v2"

	"github.com/loaderd/loaderd/client/sample"
)

// shape is an input size; the 1-pixel-wide and 2-pixel-high ones reach
// the edge cases of the filters and transforms.
type shape struct{ h, w int }

var (
	paritySizes = []shape{{32, 32}, {37, 53}, {224, 224}, {40, 1}, {2, 9}}
	factors     = []float64{-0.5, 0, 0.1, 0.5, 0.99, 1, 1.3, 1.99, 3, 10}
	hueFactors  = []float64{-0.5, -0.37, -0.1, -0.001, 0, 0.02, 0.25, 0.4999, 0.5}
	fills       = [][]uint8{nil, {128}, {10, 200, 30}}
)

// addCases registers every parity case.
func addCases(s *caseSet) {
	r := rand.New(rand.NewPCG(21, 22))
	// Equalize's table reaches 256 here (511 pixels at 0, one at 255:
	// step 2), which Image.point clips to 255.
	for _, c := range []int{1, 3} {
		edge := make([]byte, 16*32*c)
		for k := range c {
			edge[len(edge)-1-k] = 255
		}
		in := fmt.Sprintf("eqedge_%d.raw", c)
		s.addInput(in, edge)
		s.add(in, 16, 32, c, "equalize", nil, 0, 0, Equalize)
	}
	for _, sz := range paritySizes {
		for _, c := range []int{3, 1} {
			for _, pat := range patterns {
				in := fmt.Sprintf("%s_%dx%dx%d.raw", pat, sz.h, sz.w, c)
				s.addInput(in, makeInput(r, pat, sz.h, sz.w, c))
				// The full set on the main pattern, the histogram and
				// blend ops on the others.
				addPhotometric(s, in, sz.h, sz.w, c, pat == "smooth")
				if pat == "smooth" || pat == "noise" {
					addGeometric(s, r, in, sz.h, sz.w, c)
				}
				if pat == "smooth" && sz.h != 224 {
					addApplyOps(s, in, sz.h, sz.w, c, sz.h == 37 && c == 3)
				}
			}
		}
	}
}

func addPhotometric(s *caseSet, in string, h, w, c int, all bool) {
	type enh struct {
		op string
		f  func(dst, src Image, factor float64)
	}
	for _, e := range []enh{{"brightness", Brightness}, {"contrast", Contrast}, {"saturation", Saturation}, {"sharpness", Sharpness}} {
		for _, f := range factors {
			s.add(in, h, w, c, e.op, map[string]any{"factor": f}, 0, 0, func(d, src Image) { e.f(d, src, f) })
		}
	}
	s.add(in, h, w, c, "autocontrast", nil, 0, 0, AutoContrast)
	s.add(in, h, w, c, "equalize", nil, 0, 0, Equalize)
	if !all {
		return
	}
	for _, f := range hueFactors {
		s.add(in, h, w, c, "hue", map[string]any{"factor": f}, 0, 0, func(d, src Image) { Hue(d, src, f) })
	}
	for _, oc := range []int{1, 3} {
		s.add(in, h, w, c, "grayscale", map[string]any{"channels": oc}, oc, 0, Grayscale)
	}
	for bits := range 9 {
		s.add(in, h, w, c, "posterize", map[string]any{"bits": bits}, 0, 0, func(d, src Image) { Posterize(d, src, bits) })
	}
	for _, th := range []float64{0, 1, 64.5, 128, 200, 255, 256} {
		s.add(in, h, w, c, "solarize", map[string]any{"threshold": th}, 0, 0, func(d, src Image) { Solarize(d, src, th) })
	}
	s.add(in, h, w, c, "invert", nil, 0, 0, Invert)
}

func addGeometric(s *caseSet, r *rand.Rand, in string, h, w, c int) {
	fillFor := func(i int) []uint8 {
		f := fills[i%len(fills)]
		if len(f) == 3 && c == 1 {
			return f[:1]
		}
		return f
	}
	for i, a := range []float64{0, 90, 180, 270, -90, 360, 45, -30.5, 13.7, 720.25, 359.9999, 1e-9} {
		fill := fillFor(i)
		s.add(in, h, w, c, "rotate", map[string]any{"angle": a, "fill": fill}, 0, 0,
			func(d, src Image) { Rotate(d, src, a, fill) })
	}
	angles := []float64{0, 0, 30, -45, 90, 180, 12.5}
	translates := [][2]float64{{0, 0}, {3, -5}, {-7, 2}, {2.5, -1.25}, {40, 0}, {0, -100000}}
	scales := []float64{1, 1, 0.8, 1.3}
	shears := [][2]float64{{0, 0}, {0, 0}, {10, 0}, {0, -15}, {5, 7}, {-40, 20}}
	centers := []*[2]float64{nil, nil, {0, 0}, {5, 9}, {-3.5, 100}}
	for i := range 25 {
		a := angles[r.IntN(len(angles))]
		tr := translates[r.IntN(len(translates))]
		sc := scales[r.IntN(len(scales))]
		sh := shears[r.IntN(len(shears))]
		ce := centers[r.IntN(len(centers))]
		fill := fillFor(i)
		p := map[string]any{"angle": a, "translate": tr, "scale": sc, "shear": sh, "fill": fill}
		if ce != nil {
			p["center"] = *ce
		}
		s.add(in, h, w, c, "affine", p, 0, 0,
			func(d, src Image) { Affine(d, src, a, tr, sc, sh, ce, fill) })
	}
	// Each of Pillow's three affine engines: translation and scaling
	// only, a rotation (16.16 fixed point), and rotations whose corners
	// map beyond the fixed-point range (float64), one by a huge
	// magnification so that the centre still samples the image.
	for i, a := range []struct {
		angle, scale float64
		tr           [2]float64
	}{{0, 1, [2]float64{5, 3}}, {0, 0.7, [2]float64{-2, 0}}, {33, 1, [2]float64{1, -2}},
		{33, 0.001, [2]float64{0, 0}}, {-120, 1, [2]float64{40000, 0}}} {
		fill := fillFor(i)
		p := map[string]any{"angle": a.angle, "translate": a.tr, "scale": a.scale, "shear": [2]float64{}, "fill": fill}
		s.add(in, h, w, c, "affine", p, 0, 0,
			func(d, src Image) { Affine(d, src, a.angle, a.tr, a.scale, [2]float64{}, nil, fill) })
	}
	for _, k := range [][2]int{{3, 3}, {5, 3}, {9, 9}, {1, 7}, {23, 23}} {
		if k[0]/2 >= w || k[1]/2 >= h {
			continue // torchvision refuses padding as large as the image
		}
		for _, sg := range [][2]float64{{1, 1}, {0.5, 2}, {2.5, 0.8}, {5, 5}} {
			s.add(in, h, w, c, "gaussian_blur", map[string]any{"kernel": k, "sigma": sg}, 0, 1,
				func(d, src Image) {
					GaussianBlur(d, src, k, sg, make([]float32, BlurScratch(src)))
				})
		}
	}
}

// linspace returns torch.linspace(start, end, n) as float32 values
// widened, the way the AutoAugment tables hold their magnitudes.
func linspace(start, end float64, n int) []float64 {
	out := make([]float64, n)
	s, e := float32(start), float32(end)
	step := (e - s) / float32(n-1)
	for i := range out {
		if i < n/2 {
			out[i] = float64(s + step*float32(i))
		} else {
			out[i] = float64(e - step*float32(n-1-i))
		}
	}
	return out
}

// magnitudes returns the magnitudes the AutoAugment (10 bins),
// RandAugment and TrivialAugmentWide (31 bins) tables give op on an h×w
// image, negated too where the op is signed. sparse keeps every 6th
// value of the tables that have more than one.
func magnitudes(op Op, h, w int, sparse bool) []float64 {
	var tabs [][]float64
	signed := true
	posterize := func(n int, div float64) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = float64(8 - int(roundHalfEven(float64(float32(float32(i)/float32(float64(n-1)/div))))))
		}
		return v
	}
	for _, n := range []int{10, 31} {
		switch op {
		case sample.OpShearX, sample.OpShearY:
			tabs = append(tabs, linspace(0, 0.3, n), linspace(0, 0.99, n))
		case sample.OpTranslateX:
			tabs = append(tabs, linspace(0, 150.0/331.0*float64(w), n), linspace(0, 32, n))
		case sample.OpTranslateY:
			tabs = append(tabs, linspace(0, 150.0/331.0*float64(h), n), linspace(0, 32, n))
		case sample.OpRotate:
			tabs = append(tabs, linspace(0, 30, n), linspace(0, 135, n))
		case sample.OpBrightness, sample.OpColor, sample.OpContrast, sample.OpSharpness:
			tabs = append(tabs, linspace(0, 0.9, n), linspace(0, 0.99, n))
		case sample.OpPosterize:
			signed = false
			tabs = append(tabs, posterize(n, 4), posterize(n, 6))
		case sample.OpSolarize:
			signed = false
			tabs = append(tabs, linspace(255, 0, n))
		default:
			signed = false
			tabs = append(tabs, []float64{0})
		}
	}
	var out []float64
	k := 0
	for _, tab := range tabs {
		for _, m := range tab {
			k++
			if sparse && k%6 != 0 && len(tab) > 1 {
				continue
			}
			out = append(out, m)
			if signed && m != 0 {
				out = append(out, -m)
			}
		}
	}
	return out
}

func roundHalfEven(v float64) float64 {
	f := float64(int(v))
	switch d := v - f; {
	case d > 0.5 || (d == 0.5 && int(f)%2 == 1):
		return f + 1
	}
	return f
}

func addApplyOps(s *caseSet, in string, h, w, c int, full bool) {
	for op := range numOps {
		for i, m := range magnitudes(op, h, w, !full) {
			var fill []uint8
			if f := fills[i%len(fills)]; len(f) == c || len(f) == 1 {
				fill = f
			}
			p := map[string]any{"name": op.String(), "magnitude": m, "fill": fill}
			s.add(in, h, w, c, "apply_op", p, 0, 0, func(d, src Image) { ApplyOp(d, src, op, m, fill) })
		}
	}
}
