package augment

import (
	"github.com/loaderd/loaderd/augment/internal/pil"
	"github.com/loaderd/loaderd/client/sample"
)

// reference is Reference for a staged pipeline: the crop and flip by
// their oracle, then each photometric op's pil function on a new image,
// in the order the params say, the value ops by their oracle, and the
// erased box written element by element. It shares no buffer and no loop
// with apply, so it checks the staging: the order, the skipped ops, the
// channel changes and the erasing's indexing.
func (st *photoStage) reference(p *Pipeline, dst, src []byte, prm sample.Params) error {
	if len(src) != p.in.Bytes() || len(dst) < p.out.Bytes() {
		return p.checkBuffers(dst, src)
	}
	if err := st.check(&prm); err != nil {
		return err
	}
	mid := st.pre.out
	img := pil.Image{Pix: make([]byte, mid.Bytes()), H: mid.H, W: mid.W, C: mid.C}
	if err := st.pre.Reference(img.Pix, src, prm); err != nil {
		return err
	}
	next := func(c int, f func(dst, src pil.Image)) {
		out := pil.Image{Pix: make([]byte, img.H*img.W*c), H: img.H, W: img.W, C: c}
		f(out, img)
		img = out
	}
	ph := prm.Photo
	for _, s := range st.steps {
		switch o := s.op.(type) {
		case ColorJitter:
			for _, k := range ph.JitterOrder {
				if !o.on(int(k)) {
					continue
				}
				f := ph.Jitter[k]
				next(img.C, func(d, s pil.Image) {
					switch k {
					case 0:
						pil.Brightness(d, s, float64(f))
					case 1:
						pil.Contrast(d, s, float64(f))
					case 2:
						pil.Saturation(d, s, float64(f))
					case 3:
						pil.Hue(d, s, float64(f))
					}
				})
			}
		case Grayscale:
			next(s.out.C, pil.Grayscale)
		case RandomGrayscale:
			if ph.Gray {
				next(img.C, pil.Grayscale)
			}
		case GaussianBlur:
			scratch := make([]float32, pil.BlurScratch(img))
			sg := float64(ph.Sigma)
			next(img.C, func(d, s pil.Image) { pil.GaussianBlur(d, s, o.Kernel, [2]float64{sg, sg}, scratch) })
		default:
			fill := s.fill
			for _, po := range ph.Ops[:ph.NumOps] {
				next(img.C, func(d, s pil.Image) {
					pil.ApplyOp(d, s, po.Op, float64(po.Magnitude), fill)
				})
			}
		}
	}
	if err := st.post.Reference(dst, img.Pix, sample.Params{}); err != nil {
		return err
	}
	if e := st.erase; e != nil && prm.Erase.Applied {
		out, b := p.out, prm.Erase.Box
		sz := out.DType.Size()
		for c := range out.C {
			for y := range int(b.H) {
				for x := range int(b.W) {
					o := offset(out.Layout, out.H, out.W, out.C, int(b.Y)+y, int(b.X)+x, c) * sz
					switch {
					case e.random:
						convert(dst[o:o+sz], out.DType, normal(prm.Erase.Noise, (c*int(b.H)+y)*int(b.W)+x))
					default:
						copy(dst[o:o+sz], e.val[c][:sz])
					}
				}
			}
		}
	}
	return nil
}
