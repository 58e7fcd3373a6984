package augment

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/loaderd/loaderd/augment/internal/pil"
	"github.com/loaderd/loaderd/client/sample"
)

// mirror returns the left-right mirror of an H×W×3 image.
func mirror(pix []byte, h, w int) []byte {
	out := make([]byte, len(pix))
	for y := range h {
		for x := range w {
			copy(out[(y*w+x)*3:(y*w+x)*3+3], pix[(y*w+w-1-x)*3:])
		}
	}
	return out
}

// TestMirrorFreeOpsCommute checks mirrorFree's claim op by op: an op it
// lets the value stage mirror after gives, on the mirrored image, the
// mirror of its result, bit for bit. (A flipped sample then skips the
// crop stage's copy.)
func TestMirrorFreeOpsCommute(t *testing.T) {
	p := newChain(t, Spec{H: 24, W: 24, C: 3, DType: sample.U8, Layout: sample.HWC}, "flip=0.5,trivial_augment_wide,out=f32:chw")
	st := p.staged()
	r := rand.New(rand.NewPCG(7, 8))
	free := 0
	for op := range sample.NumAugOps {
		var ph sample.Photo
		ph.NumOps, ph.Ops[0] = 1, sample.PolicyOp{Op: op}
		if !st.mirrorFree(&ph) {
			continue
		}
		free++
		for _, size := range [][2]int{{31, 45}, {224, 224}, {3, 2}} {
			h, w := size[0], size[1]
			for _, mag := range []float64{-0.9, -0.3, 0, 0.2, 0.99, 4, 128} {
				if op == sample.OpPosterize {
					mag = float64(r.IntN(8) + 1)
				}
				src := noise(r, h*w*3)
				a, b := make([]byte, len(src)), make([]byte, len(src))
				pil.ApplyOp(pil.Image{Pix: a, H: h, W: w, C: 3}, pil.Image{Pix: src, H: h, W: w, C: 3}, op, mag, nil)
				pil.ApplyOp(pil.Image{Pix: b, H: h, W: w, C: 3}, pil.Image{Pix: mirror(src, h, w), H: h, W: w, C: 3}, op, mag, nil)
				if !bytes.Equal(mirror(a, h, w), b) {
					t.Fatalf("%v at %v on %d×%d: mirrorFree says it commutes with the mirror, but it does not", op, mag, h, w)
				}
			}
		}
	}
	if free < 9 {
		t.Fatalf("mirrorFree accepts %d operations, want at least identity, brightness, color, contrast, sharpness, posterize, solarize, autocontrast, equalize", free)
	}
}

// TestMirrorFreeJitterCommutes is the same check for the ops mirrorFree
// takes by type: color_jitter's four parts and grayscale.
func TestMirrorFreeJitterCommutes(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	gray := func(dst, src pil.Image, _ float64) { pil.Grayscale(dst, src) }
	for k, f := range append(jitterOps[:], gray) {
		for _, v := range []float64{0.1, 0.5, 1.3, 2, -0.4, 0.45} {
			if k < 3 && v < 0 || k == 3 && (v < -0.5 || v > 0.5) {
				continue
			}
			h, w := 29, 33
			src := noise(r, h*w*3)
			a, b := make([]byte, len(src)), make([]byte, len(src))
			f(pil.Image{Pix: a, H: h, W: w, C: 3}, pil.Image{Pix: src, H: h, W: w, C: 3}, v)
			f(pil.Image{Pix: b, H: h, W: w, C: 3}, pil.Image{Pix: mirror(src, h, w), H: h, W: w, C: 3}, v)
			if !bytes.Equal(mirror(a, h, w), b) {
				t.Fatalf("jitter part %d at %v does not commute with the mirror", k, v)
			}
		}
	}
}
