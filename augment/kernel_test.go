package augment

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/loaderd/loaderd/client/sample"
)

// chains returns the op chains the kernel is checked on for one geometry:
// torchvision's order, flip before crop, several value ops, and no crop.
func chains(r *rand.Rand, c, size, pad int, dt sample.DType, l sample.Layout) [][]Op {
	stats := func() Normalize {
		n := Normalize{}
		for range c {
			n.Mean = append(n.Mean, r.Float32())
			n.Std = append(n.Std, 0.1+r.Float32())
		}
		return n
	}
	fillC := make([]uint8, c)
	for i := range fillC {
		fillC[i] = uint8(r.Uint32())
	}
	crop := RandomCrop{Size: size, Padding: pad}
	var a []Op
	if dt.IsFloat() {
		a = []Op{crop, RandomHorizontalFlip{P: 0.5}, ToTensor{}, stats(), Output{DType: dt, Layout: l}}
	} else {
		a = []Op{crop, RandomHorizontalFlip{P: 0.5}, Output{DType: dt, Layout: l}}
	}
	b := []Op{RandomHorizontalFlip{P: 0.3}, RandomCrop{Size: size, Padding: pad, Fill: []uint8{200}}, Output{DType: dt, Layout: l}}
	d := []Op{RandomHorizontalFlip{P: 1}, Output{DType: dt, Layout: l}}
	out := [][]Op{a, b, d}
	if dt.IsFloat() {
		e := []Op{RandomCrop{Size: size, Padding: pad, Fill: fillC}, Output{DType: dt, Layout: l},
			Normalize{Mean: []float32{0.5}, Std: []float32{0.25}}, stats()}
		out = append(out, e)
	}
	return out
}

// paramsFor returns edge and random params for p: every corner of the crop
// range, mirrored and not, and a few draws.
func paramsFor(p *Pipeline, seed uint64) []sample.Params {
	var ps []sample.Params
	for _, top := range []int32{0, p.maxTop} {
		for _, left := range []int32{0, p.maxLeft} {
			for _, f := range []bool{false, true} {
				if !f || p.flip {
					ps = append(ps, sample.Params{Top: top, Left: left, Flip: f})
				}
			}
		}
	}
	for i := range 3 {
		ps = append(ps, p.Draw(seed, 1, int64(i)))
	}
	return ps
}

// TestApplyMatchesReference checks the fused kernel against the composed
// oracles byte for byte, for every dtype and layout pair, both channel
// counts, non-square images, paddings from 0 to more than the image, crop
// sizes from 1 to the padded size, and edge and random params. Every dst
// byte must be written, and none past Out().Bytes().
func TestApplyMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	sizes := [][2]int{{6, 9}, {9, 6}, {1, 1}, {32, 32}}
	checked, failed := 0, 0
	for _, hw := range sizes {
		for _, c := range []int{1, 3} {
			for _, inL := range []sample.Layout{sample.HWC, sample.CHW} {
				in := Spec{H: hw[0], W: hw[1], C: c, DType: sample.U8, Layout: inL}
				src := make([]byte, in.Bytes())
				for i := range src {
					src[i] = uint8(r.Uint32())
				}
				for _, pad := range []int{0, 1, 4, 11} {
					maxSize := min(in.H, in.W) + 2*pad
					for _, size := range uniq(1, min(in.H, in.W), maxSize, 1+r.IntN(maxSize)) {
						for _, dt := range []sample.DType{sample.U8, sample.F32, sample.F16, sample.BF16} {
							for _, outL := range []sample.Layout{sample.HWC, sample.CHW} {
								for _, ops := range chains(r, c, size, pad, dt, outL) {
									n, bad := checkAgainstReference(t, in, src, ops)
									checked += n
									if failed += bad; failed > 10 {
										t.Fatal("too many failures")
									}
								}
							}
						}
					}
				}
			}
		}
	}
	if checked < 10000 {
		t.Fatalf("only %d cases checked", checked)
	}
}

func uniq(v ...int) []int {
	var out []int
	for _, x := range v {
		seen := false
		for _, y := range out {
			seen = seen || x == y
		}
		if !seen {
			out = append(out, x)
		}
	}
	return out
}

func checkAgainstReference(t *testing.T, in Spec, src []byte, ops []Op) (checked, failed int) {
	t.Helper()
	p, err := NewPipeline(in, ops...)
	if err != nil {
		t.Fatalf("NewPipeline(%v, %s): %v", in, FormatOps(ops), err)
	}
	n := p.Out().Bytes()
	got, want := make([]byte, n+8), make([]byte, n+8)
	for _, prm := range paramsFor(p, uint64(len(src))) {
		for i := range got {
			got[i], want[i] = 0xa5, 0x5a // unwritten bytes differ
		}
		if err := p.Apply(got, src, prm); err != nil {
			t.Fatalf("Apply(%v, %s, %+v): %v", in, p, prm, err)
		}
		if err := p.Reference(want, src, prm); err != nil {
			t.Fatalf("Reference(%v, %s, %+v): %v", in, p, prm, err)
		}
		checked++
		if !bytes.Equal(got[:n], want[:n]) || !bytes.Equal(got[n:], bytes.Repeat([]byte{0xa5}, 8)) {
			failed++
			t.Errorf("in %v, ops %s, params %+v: fused != reference\n got  %s\n want %s",
				in, p, prm, show(got[:n], p.Out()), show(want[:n], p.Out()))
		}
		// The same through a dst one byte off alignment (the byte-array path).
		if err := p.Apply(got[1:], src, prm); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[1:n+1], want[:n]) {
			failed++
			t.Errorf("in %v, ops %s, params %+v: misaligned fused != reference\n got  %s\n want %s",
				in, p, prm, show(got[1:n+1], p.Out()), show(want[:n], p.Out()))
		}
	}
	return checked, failed
}

// show formats the first elements of an output buffer.
func show(b []byte, s Spec) string {
	var out []string
	for i := 0; i < s.Elems() && i < 24; i++ {
		switch s.DType {
		case sample.U8:
			out = append(out, fmt.Sprint(b[i]))
		case sample.F32:
			out = append(out, fmt.Sprint(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))))
		default:
			out = append(out, fmt.Sprintf("%#04x", binary.LittleEndian.Uint16(b[2*i:])))
		}
	}
	return fmt.Sprint(out)
}

// TestTorchvisionValues: with no flip and no padding the f32 output is
// torchvision's Normalize(ToTensor(x)), computed here step by step in
// float32, for every pixel value in every channel.
func TestTorchvisionValues(t *testing.T) {
	in := Spec{H: 16, W: 16, C: 3, DType: sample.U8, Layout: sample.HWC}
	p, err := NewPipeline(in, RandomCrop{Size: 16}, ToTensor{}, Normalize{Mean: CIFAR10Mean, Std: CIFAR10Std})
	if err != nil {
		t.Fatal(err)
	}
	src := make([]byte, in.Bytes())
	for i := range src {
		src[i] = uint8(i) // every value appears in every channel
	}
	dst := make([]byte, p.Out().Bytes())
	if err := p.Apply(dst, src, sample.Params{}); err != nil {
		t.Fatal(err)
	}
	for y := range in.H {
		for x := range in.W {
			for c := range in.C {
				v := src[(y*in.W+x)*in.C+c]
				scaled := float32(v) / float32(255)
				want := (scaled - CIFAR10Mean[c]) / CIFAR10Std[c]
				got := math.Float32frombits(binary.LittleEndian.Uint32(dst[4*((c*in.H+y)*in.W+x):]))
				if math.Float32bits(got) != math.Float32bits(want) {
					t.Fatalf("pixel %d channel %d: got %v, want %v", v, c, got, want)
				}
			}
		}
	}
}

// TestHandValues pins a few results worked out independently: each step
// of ((x/255) − mean)/std rounded to float32 by hand-held arithmetic.
func TestHandValues(t *testing.T) {
	for _, tc := range []struct {
		v    uint8
		c    int
		want uint32 // float32 bits
	}{
		{0, 0, 0xbffea713},   // −0.4914/0.2470 = −1.9894737
		{0, 1, 0xbffd7a10},   // −0.4822/0.2435 = −1.9802876
		{0, 2, 0xbfda7891},   // −0.4465/0.2616 = −1.7068044
		{255, 0, 0x4003c873}, // 0.5086/0.2470 = 2.0591094
		{255, 1, 0x40081864}, // 0.5178/0.2435 = 2.1264887
		{255, 2, 0x400769b1}, // 0.5535/0.2616 = 2.1158259
		{128, 0, 0x3d2f2140}, // (0.5019608 − 0.4914)/0.2470 = 0.042756319
		{1, 2, 0xbfd88d5a},   // (0.003921569 − 0.4465)/0.2616 = −1.6918137
	} {
		p, err := NewPipeline(Spec{H: 1, W: 1, C: 3, DType: sample.U8, Layout: sample.CHW}, CIFARTrain(sample.F32, sample.CHW)[2:]...)
		if err != nil {
			t.Fatal(err)
		}
		src := []byte{tc.v, tc.v, tc.v}
		dst := make([]byte, 12)
		if err := p.Apply(dst, src, sample.Params{}); err != nil {
			t.Fatal(err)
		}
		if got := binary.LittleEndian.Uint32(dst[4*tc.c:]); got != tc.want {
			t.Errorf("pixel %d channel %d: got %#x (%v), want %#x (%v)", tc.v, tc.c,
				got, math.Float32frombits(got), tc.want, math.Float32frombits(tc.want))
		}
	}
}

// TestFillAndFlipGeometry pins tiny cases by hand. A 1×3 row 1 2 3 padded
// by 1 with fill 9 is the 3×5 image
//
//	9 9 9 9 9
//	9 1 2 3 9
//	9 9 9 9 9
//
// and a 1×1 image padded by 3 has 2×2 windows that miss it entirely.
func TestFillAndFlipGeometry(t *testing.T) {
	for _, tc := range []struct {
		src  []byte
		crop RandomCrop
		prm  sample.Params
		want []byte
	}{
		{[]byte{1, 2, 3}, RandomCrop{3, 1, []uint8{9}}, sample.Params{Left: 0}, []byte{9, 9, 9, 9, 1, 2, 9, 9, 9}},
		{[]byte{1, 2, 3}, RandomCrop{3, 1, []uint8{9}}, sample.Params{Left: 2}, []byte{9, 9, 9, 2, 3, 9, 9, 9, 9}},
		{[]byte{1, 2, 3}, RandomCrop{3, 1, []uint8{9}}, sample.Params{Left: 2, Flip: true}, []byte{9, 9, 9, 9, 3, 2, 9, 9, 9}},
		{[]byte{1, 2, 3}, RandomCrop{3, 1, []uint8{9}}, sample.Params{Left: 1, Flip: true}, []byte{9, 9, 9, 3, 2, 1, 9, 9, 9}},
		{[]byte{1, 2, 3}, RandomCrop{1, 0, nil}, sample.Params{Left: 2, Flip: true}, []byte{3}},
		{[]byte{7}, RandomCrop{2, 3, []uint8{4}}, sample.Params{Top: 0, Left: 5}, []byte{4, 4, 4, 4}},
		{[]byte{7}, RandomCrop{2, 3, []uint8{4}}, sample.Params{Top: 2, Left: 3, Flip: true}, []byte{4, 4, 4, 7}},
		{[]byte{7}, RandomCrop{2, 3, []uint8{4}}, sample.Params{Top: 3, Left: 2}, []byte{4, 7, 4, 4}},
	} {
		in := Spec{H: 1, W: len(tc.src), C: 1, DType: sample.U8, Layout: sample.HWC}
		p, err := NewPipeline(in, tc.crop, RandomHorizontalFlip{P: 0.5})
		if err != nil {
			t.Fatal(err)
		}
		dst := make([]byte, len(tc.want))
		if err := p.Apply(dst, tc.src, tc.prm); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(dst, tc.want) {
			t.Errorf("%v %+v: got %v, want %v", tc.crop, tc.prm, dst, tc.want)
		}
	}
}

// TestApplyAllocatesNothing covers every loop nest.
func TestApplyAllocatesNothing(t *testing.T) {
	for _, inL := range []sample.Layout{sample.HWC, sample.CHW} {
		for _, dt := range []sample.DType{sample.U8, sample.F32, sample.F16, sample.BF16} {
			for _, outL := range []sample.Layout{sample.HWC, sample.CHW} {
				in := Spec{H: 32, W: 32, C: 3, DType: sample.U8, Layout: inL}
				p, err := NewPipeline(in, CIFARTrain(dt, outL)...)
				if err != nil {
					t.Fatal(err)
				}
				src, dst := make([]byte, in.Bytes()), make([]byte, p.Out().Bytes())
				i := int64(0)
				allocs := testing.AllocsPerRun(100, func() {
					i++
					if err := p.Apply(dst, src, p.Draw(1, 0, i)); err != nil {
						t.Fatal(err)
					}
				})
				if allocs != 0 {
					t.Errorf("%v→%s: %v allocs per Apply", inL, p.Out(), allocs)
				}
			}
		}
	}
}
