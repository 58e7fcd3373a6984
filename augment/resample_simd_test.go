package augment

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/loaderd/loaderd/client/sample"
)

// TestResampleSIMDMatchesGo holds the assembly passes to the Go ones
// (themselves held to torchvision by TestTorchvisionParity) byte for byte:
// random sizes, boxes and output sizes, shrinking and enlarging, RGB and
// grey, boxes reaching the image's last row and column (where the
// assembly leaves the last rows to Go), scaled-decode boxes, and padded
// centre crops.
func TestResampleSIMDMatchesGo(t *testing.T) {
	if !haveSIMD {
		t.Skip("no SIMD resampler on this machine (amd64 with AVX2)")
	}
	r := rand.New(rand.NewPCG(3, 4))
	var simd, plain Scratch
	run := func(s *Scratch, useSIMD bool, f func(*Scratch) error) error {
		old := haveSIMD
		haveSIMD = useSIMD
		defer func() { haveSIMD = old }()
		return f(s)
	}
	for i := range 600 {
		h, w := 1+r.IntN(400), 1+r.IntN(400)
		c := 3
		if i%5 == 4 {
			c = 1
		}
		src := make([]byte, h*w*c)
		for j := range src {
			src[j] = byte(r.Uint32())
		}
		var ops []Op
		var prm sample.Params
		rrc := i%3 != 2
		switch i % 3 {
		case 0, 1:
			size := 1 + r.IntN(300)
			ops = []Op{RandomResizedCrop{Size: size}}
			bh, bw := 1+r.IntN(h), 1+r.IntN(w)
			y, x := r.IntN(h-bh+1), r.IntN(w-bw+1)
			if i%4 == 0 { // the bottom right corner
				y, x = h-bh, w-bw
			}
			prm.Box = sample.Box{X: int32(x), Y: int32(y), W: int32(bw), H: int32(bh)}
		case 2:
			ops = []Op{Resize{Size: 1 + r.IntN(300)}, CenterCrop{Size: 1 + r.IntN(300)}}
		}
		p, err := NewPipeline(Spec{C: c, DType: sample.U8, Layout: sample.HWC}, ops...)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, p.Out().Bytes())
		want := make([]byte, p.Out().Bytes())
		d := 1
		if i%7 == 3 {
			d = []int{2, 4, 8}[r.IntN(3)]
		}
		apply := func(dst []byte) func(*Scratch) error {
			return func(s *Scratch) error {
				if d == 1 {
					return p.ApplySized(dst, src, h, w, prm, s)
				}
				sh, sw := ScaledSize(h, w, d)
				return p.ApplyScaled(dst, src[:sh*sw*c], h, w, d, prm, s)
			}
		}
		if err := run(&simd, true, apply(got)); err != nil {
			if rrc || d == 1 {
				t.Fatalf("case %d: %v", i, err)
			}
			continue // a scale the chain does not take
		}
		if err := run(&plain, false, apply(want)); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			n := 0
			for j := range got {
				if got[j] != want[j] {
					n++
				}
			}
			t.Errorf("case %d (%dx%dx%d %v %+v 1/%d): %d of %d bytes differ", i, w, h, c, ops, prm.Box, d, n, len(got))
		}
	}
}
