package imagedec

import (
	"fmt"
	"image"
	"image/color"
)

// toRGB writes img as RGB HWC into dst (exactly W·H·3 bytes). Every image
// type the decoders produce has a path through its Pix slices; colours
// are straight (non-premultiplied) and alpha is dropped, which is what
// color.NRGBAModel and PIL's convert("RGB") give.
func toRGB(dst []byte, img image.Image) error {
	switch m := img.(type) {
	case *image.YCbCr:
		ycbcrToRGB(dst, m)
	case *image.NYCbCrA:
		ycbcrToRGB(dst, &m.YCbCr)
	case *image.Gray:
		grayToRGB(dst, m)
	case *image.NRGBA:
		w, r := m.Rect.Dx(), m.Rect
		for y := r.Min.Y; y < r.Max.Y; y++ {
			src := m.Pix[m.PixOffset(r.Min.X, y):][:4*w]
			out := dst[(y-r.Min.Y)*w*3:][:3*w]
			for x := range w {
				out[3*x], out[3*x+1], out[3*x+2] = src[4*x], src[4*x+1], src[4*x+2]
			}
		}
	case *image.RGBA:
		rgbaToRGB(dst, m)
	case *image.Paletted:
		palettedToRGB(dst, m)
	case *image.CMYK:
		w, r := m.Rect.Dx(), m.Rect
		for y := r.Min.Y; y < r.Max.Y; y++ {
			src := m.Pix[m.PixOffset(r.Min.X, y):][:4*w]
			out := dst[(y-r.Min.Y)*w*3:][:3*w]
			for x := range w {
				out[3*x], out[3*x+1], out[3*x+2] = color.CMYKToRGB(src[4*x], src[4*x+1], src[4*x+2], src[4*x+3])
			}
		}
	case *image.Gray16:
		w, r := m.Rect.Dx(), m.Rect
		for y := r.Min.Y; y < r.Max.Y; y++ {
			src := m.Pix[m.PixOffset(r.Min.X, y):][:2*w]
			out := dst[(y-r.Min.Y)*w*3:][:3*w]
			for x := range w {
				v := src[2*x] // big-endian: the high byte
				out[3*x], out[3*x+1], out[3*x+2] = v, v, v
			}
		}
	case *image.NRGBA64:
		w, r := m.Rect.Dx(), m.Rect
		for y := r.Min.Y; y < r.Max.Y; y++ {
			src := m.Pix[m.PixOffset(r.Min.X, y):][:8*w]
			out := dst[(y-r.Min.Y)*w*3:][:3*w]
			for x := range w {
				out[3*x], out[3*x+1], out[3*x+2] = src[8*x], src[8*x+2], src[8*x+4]
			}
		}
	case *image.RGBA64:
		w, r := m.Rect.Dx(), m.Rect
		for y := r.Min.Y; y < r.Max.Y; y++ {
			src := m.Pix[m.PixOffset(r.Min.X, y):][:8*w]
			out := dst[(y-r.Min.Y)*w*3:][:3*w]
			for x := range w {
				p := src[8*x:][:8:8]
				c := color.NRGBA64Model.Convert(color.RGBA64{
					R: uint16(p[0])<<8 | uint16(p[1]), G: uint16(p[2])<<8 | uint16(p[3]),
					B: uint16(p[4])<<8 | uint16(p[5]), A: uint16(p[6])<<8 | uint16(p[7])}).(color.NRGBA64)
				out[3*x], out[3*x+1], out[3*x+2] = uint8(c.R>>8), uint8(c.G>>8), uint8(c.B>>8)
			}
		}
	default:
		return fmt.Errorf("%w: pixel type %T", ErrFormat, img)
	}
	return nil
}

// ycc is color.YCbCrToRGB split in two: the chroma terms are computed once
// per chroma sample and shared by the 1 to 8 luma samples that use it.
type ycc struct{ r, g, b int32 }

func chroma(cb, cr uint8) ycc {
	cb1, cr1 := int32(cb)-128, int32(cr)-128
	return ycc{91881 * cr1, -22554*cb1 - 46802*cr1, 116130 * cb1}
}

// clampTab[v>>16 + 256] is color.YCbCrToRGB's clamping of a 16.16 value:
// 0 below zero, 255 above. Every sum of a luma and a chroma term shifts
// into [-228, 481], so the index stays in the table (and the mask lets the
// compiler drop the bounds check).
var clampTab = func() (t [1024]uint8) {
	for i := range t {
		t[i] = uint8(min(max(i-256, 0), 255))
	}
	return t
}()

func clamp16(v int32) uint8 { return clampTab[uint32(v>>16+256)&1023] }

func (c ycc) put(out []byte, y uint8) {
	yy := int32(y) * 0x10101
	out = out[:3:3]
	out[0], out[1], out[2] = clamp16(yy+c.r), clamp16(yy+c.g), clamp16(yy+c.b)
}

func ycbcrToRGB(dst []byte, m *image.YCbCr) {
	r := m.Rect
	w := r.Dx()
	switch {
	case m.SubsampleRatio == image.YCbCrSubsampleRatio444:
		for y := r.Min.Y; y < r.Max.Y; y++ {
			ys := m.Y[m.YOffset(r.Min.X, y):][:w]
			ci := m.COffset(r.Min.X, y)
			cb, cr := m.Cb[ci:][:w], m.Cr[ci:][:w]
			out := dst[(y-r.Min.Y)*w*3:][:3*w]
			for x := range w {
				chroma(cb[x], cr[x]).put(out[3*x:], ys[x])
			}
		}
	case m.SubsampleRatio == image.YCbCrSubsampleRatio420 && r.Min.X&1 == 0 && r.Min.Y&1 == 0:
		// The common JPEG case: one chroma sample for a 2×2 block, whose
		// terms are computed once for its four pixels.
		for y := r.Min.Y; y < r.Max.Y; y += 2 {
			ci := m.COffset(r.Min.X, y)
			cb, cr := m.Cb[ci:][:(w+1)/2], m.Cr[ci:][:(w+1)/2]
			y0 := m.Y[m.YOffset(r.Min.X, y):][:w]
			o0 := dst[(y-r.Min.Y)*w*3:][:3*w]
			if y+1 == r.Max.Y {
				row422(o0, y0, cb, cr)
				break
			}
			y1 := m.Y[m.YOffset(r.Min.X, y+1):][:w]
			o1 := dst[(y+1-r.Min.Y)*w*3:][:3*w]
			x := 0
			for cx := range w / 2 {
				c := chroma(cb[cx], cr[cx])
				c.put(o0[3*x:], y0[x])
				c.put(o0[3*x+3:], y0[x+1])
				c.put(o1[3*x:], y1[x])
				c.put(o1[3*x+3:], y1[x+1])
				x += 2
			}
			if x < w {
				c := chroma(cb[x/2], cr[x/2])
				c.put(o0[3*x:], y0[x])
				c.put(o1[3*x:], y1[x])
			}
		}
	case (m.SubsampleRatio == image.YCbCrSubsampleRatio420 || m.SubsampleRatio == image.YCbCrSubsampleRatio422) && r.Min.X&1 == 0:
		for y := r.Min.Y; y < r.Max.Y; y++ {
			ci := m.COffset(r.Min.X, y)
			row422(dst[(y-r.Min.Y)*w*3:][:3*w], m.Y[m.YOffset(r.Min.X, y):][:w], m.Cb[ci:][:(w+1)/2], m.Cr[ci:][:(w+1)/2])
		}
	default: // 4:4:0, 4:1:1, 4:1:0, odd origins: rare; COffset per pixel, still no At.
		for y := r.Min.Y; y < r.Max.Y; y++ {
			ys := m.Y[m.YOffset(r.Min.X, y):][:w]
			out := dst[(y-r.Min.Y)*w*3:][:3*w]
			for x := range w {
				ci := m.COffset(r.Min.X+x, y)
				chroma(m.Cb[ci], m.Cr[ci]).put(out[3*x:], ys[x])
			}
		}
	}
}

// row422 converts a row whose chroma is subsampled 2:1 across.
func row422(out, ys, cb, cr []byte) {
	w := len(ys)
	x := 0
	for cx := range w / 2 {
		c := chroma(cb[cx], cr[cx])
		c.put(out[3*x:], ys[x])
		c.put(out[3*x+3:], ys[x+1])
		x += 2
	}
	if x < w {
		chroma(cb[x/2], cr[x/2]).put(out[3*x:], ys[x])
	}
}

func grayToRGB(dst []byte, m *image.Gray) {
	w, r := m.Rect.Dx(), m.Rect
	for y := r.Min.Y; y < r.Max.Y; y++ {
		src := m.Pix[m.PixOffset(r.Min.X, y):][:w]
		out := dst[(y-r.Min.Y)*w*3:][:3*w]
		for x, v := range src {
			out[3*x], out[3*x+1], out[3*x+2] = v, v, v
		}
	}
}

// rgbaToRGB un-premultiplies, as color.NRGBAModel does; opaque pixels,
// nearly all of them in practice, are copied.
func rgbaToRGB(dst []byte, m *image.RGBA) {
	w, r := m.Rect.Dx(), m.Rect
	for y := r.Min.Y; y < r.Max.Y; y++ {
		src := m.Pix[m.PixOffset(r.Min.X, y):][:4*w]
		out := dst[(y-r.Min.Y)*w*3:][:3*w]
		for x := range w {
			p := src[4*x:][:4:4]
			switch a := p[3]; a {
			case 0xff:
				out[3*x], out[3*x+1], out[3*x+2] = p[0], p[1], p[2]
			case 0:
				out[3*x], out[3*x+1], out[3*x+2] = 0, 0, 0
			default:
				a16 := uint32(a) * 0x101
				un := func(v uint8) uint8 { return uint8((uint32(v) * 0x101 * 0xffff / a16) >> 8) }
				out[3*x], out[3*x+1], out[3*x+2] = un(p[0]), un(p[1]), un(p[2])
			}
		}
	}
}

// palettedToRGB looks each index up in a table built once per image; an
// index past the palette (which the decoders reject) would read black.
func palettedToRGB(dst []byte, m *image.Paletted) {
	var lut [256][3]uint8
	for i, c := range m.Palette {
		if i == len(lut) {
			break
		}
		n := color.NRGBAModel.Convert(c).(color.NRGBA)
		lut[i] = [3]uint8{n.R, n.G, n.B}
	}
	w, r := m.Rect.Dx(), m.Rect
	for y := r.Min.Y; y < r.Max.Y; y++ {
		src := m.Pix[m.PixOffset(r.Min.X, y):][:w]
		out := dst[(y-r.Min.Y)*w*3:][:3*w]
		for x, v := range src {
			c := &lut[v]
			out[3*x], out[3*x+1], out[3*x+2] = c[0], c[1], c[2]
		}
	}
}
