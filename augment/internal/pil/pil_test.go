package pil

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/loaderd/loaderd/client/sample"
)

func newImage(h, w, c int) Image { return Image{Pix: make([]byte, h*w*c), H: h, W: w, C: c} }

func randomImage(r *rand.Rand, h, w, c int) Image {
	m := newImage(h, w, c)
	for i := range m.Pix {
		m.Pix[i] = byte(r.IntN(256))
	}
	return m
}

// TestIdentities checks parameters at which an operation must return its
// input unchanged.
func TestIdentities(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	ops := []struct {
		name string
		f    func(dst, src Image)
	}{
		{"brightness 1", func(d, s Image) { Brightness(d, s, 1) }},
		{"contrast 1", func(d, s Image) { Contrast(d, s, 1) }},
		{"saturation 1", func(d, s Image) { Saturation(d, s, 1) }},
		{"sharpness 1", func(d, s Image) { Sharpness(d, s, 1) }},
		{"posterize 8", func(d, s Image) { Posterize(d, s, 8) }},
		{"solarize 256", func(d, s Image) { Solarize(d, s, 256) }},
		{"rotate 0", func(d, s Image) { Rotate(d, s, 0, nil) }},
		{"rotate 360", func(d, s Image) { Rotate(d, s, 360, nil) }},
		{"rotate -720", func(d, s Image) { Rotate(d, s, -720, nil) }},
		{"affine identity", func(d, s Image) { Affine(d, s, 0, [2]float64{}, 1, [2]float64{}, nil, nil) }},
		{"identity op", func(d, s Image) { ApplyOp(d, s, sample.OpIdentity, 0, nil) }},
		{"shear 0", func(d, s Image) { ApplyOp(d, s, sample.OpShearX, 0, nil) }},
		{"translate 0.9", func(d, s Image) { ApplyOp(d, s, sample.OpTranslateY, 0.9, nil) }},
		{"blur 1x1", func(d, s Image) { GaussianBlur(d, s, [2]int{1, 1}, [2]float64{1, 1}, make([]float32, BlurScratch(s))) }},
		{"invert twice", func(d, s Image) {
			tmp := newImage(s.H, s.W, s.C)
			Invert(tmp, s)
			Invert(d, tmp)
		}},
		{"rotate 90 four times", func(d, s Image) {
			a, b := newImage(s.H, s.W, s.C), newImage(s.H, s.W, s.C)
			Rotate(a, s, 90, nil)
			Rotate(b, a, 90, nil)
			Rotate(a, b, -90, nil)
			Rotate(d, a, 270, nil)
			Rotate(a, d, 180, nil)
			Rotate(d, a, 180, nil)
		}},
	}
	for _, op := range ops {
		for _, c := range []int{1, 3} {
			src := randomImage(r, 17, 17, c)
			dst := newImage(17, 17, c)
			op.f(dst, src)
			if !bytes.Equal(dst.Pix, src.Pix) {
				t.Errorf("%s, %d channels: output differs from input", op.name, c)
			}
		}
	}
}

// TestConstants checks operations whose output is known without Pillow.
func TestConstants(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	src := randomImage(r, 9, 14, 3)
	flat := newImage(9, 14, 3)
	for i := range flat.Pix {
		flat.Pix[i] = 90
	}
	tests := []struct {
		name string
		src  Image
		f    func(dst, src Image)
		want func(i int, v byte) byte
	}{
		{"brightness 0", src, func(d, s Image) { Brightness(d, s, 0) }, func(int, byte) byte { return 0 }},
		{"posterize 0", src, func(d, s Image) { Posterize(d, s, 0) }, func(int, byte) byte { return 0 }},
		{"posterize 3", src, func(d, s Image) { Posterize(d, s, 3) }, func(_ int, v byte) byte { return v &^ 31 }},
		{"solarize 0", src, func(d, s Image) { Solarize(d, s, 0) }, func(_ int, v byte) byte { return 255 - v }},
		{"solarize 100", src, func(d, s Image) { Solarize(d, s, 100) }, func(_ int, v byte) byte {
			if v < 100 {
				return v
			}
			return 255 - v
		}},
		{"contrast 0 of flat", flat, func(d, s Image) { Contrast(d, s, 0) }, func(_ int, v byte) byte { return luma(90, 90, 90) }},
		{"equalize flat", flat, Equalize, func(_ int, v byte) byte { return v }},
		{"autocontrast flat", flat, AutoContrast, func(_ int, v byte) byte { return v }},
		{"hue gray", flat, func(d, s Image) { Hue(d, s, 0.3) }, func(_ int, v byte) byte { return v }},
		{"sharpness 5 flat", flat, func(d, s Image) { Sharpness(d, s, 5) }, func(_ int, v byte) byte { return v }},
		{"blur flat", flat, func(d, s Image) {
			GaussianBlur(d, s, [2]int{7, 5}, [2]float64{2, 1}, make([]float32, BlurScratch(s)))
		}, func(_ int, v byte) byte { return v }},
		{"translate right 3", src, func(d, s Image) { ApplyOp(d, s, sample.OpTranslateX, 3.7, []uint8{7}) }, func(i int, _ byte) byte {
			x := i / 3 % 14
			if x < 3 {
				return 7
			}
			return src.Pix[i-9]
		}},
	}
	for _, tt := range tests {
		dst := newImage(tt.src.H, tt.src.W, tt.src.C)
		tt.f(dst, tt.src)
		for i, v := range tt.src.Pix {
			if w := tt.want(i, v); dst.Pix[i] != w {
				t.Errorf("%s: byte %d is %d, want %d", tt.name, i, dst.Pix[i], w)
				break
			}
		}
	}
}

// TestGrayscale checks that the three output channels are equal to the
// one-channel output, and that Saturation 0 gives the same gray.
func TestGrayscale(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	src := randomImage(r, 11, 7, 3)
	g1, g3, s0 := newImage(11, 7, 1), newImage(11, 7, 3), newImage(11, 7, 3)
	Grayscale(g1, src)
	Grayscale(g3, src)
	Saturation(s0, src, 0)
	for i, v := range g1.Pix {
		for k := range 3 {
			if g3.Pix[3*i+k] != v || s0.Pix[3*i+k] != v {
				t.Fatalf("pixel %d: gray %d, 3-channel %v, saturation 0 %v", i, v, g3.Pix[3*i:3*i+3], s0.Pix[3*i:3*i+3])
			}
		}
	}
	if got := luma(255, 255, 255); got != 255 {
		t.Errorf("luma(white) = %d", got)
	}
}

func TestOpNames(t *testing.T) {
	for op := range numOps {
		got, ok := ParseOp(op.String())
		if !ok || got != op {
			t.Errorf("ParseOp(%q) = %v, %v", op.String(), got, ok)
		}
	}
	if _, ok := ParseOp("Rotate_"); ok {
		t.Error("ParseOp accepted an unknown name")
	}
	if s := Op(200).String(); s != "AugOp(200)" {
		t.Errorf("Op(200).String() = %q", s)
	}
}

// TestRound15 compares round15 with a decimal rounding through strconv,
// which rounds exactly, ties to even, as Python's round does.
func TestRound15(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	vals := []float64{0, 1, -1, 0.5, 6.123233995736766e-17, -1.8369701987210297e-16, 0.7071067811865476, 0.1234567890123455}
	for range 100000 {
		vals = append(vals, r.Float64()*2-1, math.Cos(r.Float64()*7))
	}
	for _, v := range vals {
		want, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'f', 15, 64), 64)
		if got := round15(v); got != want {
			t.Fatalf("round15(%v) = %v, want %v", v, got, want)
		}
	}
}

func TestPyMod(t *testing.T) {
	for _, tt := range []struct{ x, want float64 }{
		{0, 0}, {360, 0}, {-90, 270}, {725.5, 5.5}, {-1e-20, 360}, {359.5, 359.5},
	} {
		if got := pyMod(tt.x, 360); got != tt.want {
			t.Errorf("pyMod(%v, 360) = %v, want %v", tt.x, got, tt.want)
		}
	}
}

// TestNoAllocs checks that no operation allocates.
func TestNoAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	src := randomImage(r, 32, 32, 3)
	dst := newImage(32, 32, 3)
	scratch := make([]float32, BlurScratch(src))
	fill := []uint8{1, 2, 3}
	for op := range numOps {
		if n := testing.AllocsPerRun(5, func() { ApplyOp(dst, src, op, 0.3, fill) }); n != 0 {
			t.Errorf("%v: %v allocations", op, n)
		}
	}
	others := map[string]func(){
		"hue":       func() { Hue(dst, src, 0.2) },
		"grayscale": func() { Grayscale(dst, src) },
		"affine":    func() { Affine(dst, src, 10, [2]float64{1, 2}, 1.1, [2]float64{3, 4}, &[2]float64{3, 3}, fill) },
		"blur":      func() { GaussianBlur(dst, src, [2]int{5, 5}, [2]float64{1, 1}, scratch) },
	}
	for name, f := range others {
		if n := testing.AllocsPerRun(5, f); n != 0 {
			t.Errorf("%s: %v allocations", name, n)
		}
	}
}

func TestPanics(t *testing.T) {
	src := newImage(4, 4, 3)
	for name, f := range map[string]func(){
		"shape":     func() { Invert(newImage(4, 5, 3), src) },
		"channels":  func() { Invert(newImage(4, 4, 2), newImage(4, 4, 2)) },
		"bits":      func() { Posterize(newImage(4, 4, 3), src, 9) },
		"hue":       func() { Hue(newImage(4, 4, 3), src, 0.6) },
		"fill":      func() { Rotate(newImage(4, 4, 3), src, 10, []uint8{1, 2}) },
		"scratch":   func() { GaussianBlur(newImage(4, 4, 3), src, [2]int{3, 3}, [2]float64{1, 1}, nil) },
		"even":      func() { GaussianBlur(newImage(4, 4, 3), src, [2]int{2, 3}, [2]float64{1, 1}, make([]float32, 48)) },
		"scale":     func() { Affine(newImage(4, 4, 3), src, 0, [2]float64{}, 0, [2]float64{}, nil, nil) },
		"grayscale": func() { Grayscale(newImage(4, 4, 2), src) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}
