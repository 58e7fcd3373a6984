package inspect

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/loader"
)

// SheetOptions lay out a contact sheet.
type SheetOptions struct {
	Columns int // 0: 8
	// Scale draws each pixel as Scale×Scale; 0: cells at least 64 pixels
	// wide. Images of varying size drawn without Ops are thumbnails, each
	// scaled to fit a square of 64·Scale pixels keeping its aspect (0: 128).
	Scale    int
	Ops      []augment.Op // ops to apply first (SheetOps); nil: the samples as stored
	Seed     uint64       // augmentation key, with Epoch and the sample index
	Epoch    int64
	Captions bool // write each sample's index and class under it, on two lines
}

const (
	gap      = 2
	lineH    = 13 // basicfont.Face7x13
	captionH = 2*lineH + 2
)

var background = color.RGBA{40, 40, 40, 255}

// ContactSheet draws the given samples of src in a grid, row by row. With
// ops it draws each sample as the fused augmentation kernel produces it
// for (Seed, Epoch, index), in uint8 before any normalisation; for images
// of varying size (a loader.SizedSource) the ops must open with resize,
// center_crop or random_resized_crop, and the sample is read as a stream's
// worker reads it (decoded at the DCT scale the params allow).
func ContactSheet(src loader.Source, indices []int64, o SheetOptions) (*image.RGBA, error) {
	if len(indices) == 0 {
		return nil, errNoSamples
	}
	in := src.Spec()
	ss, varying := loader.As[loader.SizedSource](src)
	if in.H == 0 && in.W == 0 && !varying {
		return nil, fmt.Errorf("inspect: %s gives images of varying size but no loader.SizedSource", src)
	}
	thumbs := varying && len(o.Ops) == 0
	var pipe *augment.Pipeline
	var out augment.Spec
	scale, boxW, boxH := o.Scale, 0, 0 // boxW×boxH: a cell's image
	if thumbs {
		if scale <= 0 {
			scale = 2
		}
		boxW, boxH = 64*scale, 64*scale
	} else {
		var err error
		pipe, err = augment.NewPipeline(in, append(append([]augment.Op(nil), o.Ops...), augment.Output{DType: sample.U8, Layout: sample.HWC})...)
		if err != nil {
			return nil, fmt.Errorf("inspect: %w", err)
		}
		if varying && !pipe.Resamples() {
			return nil, errFixedAugment(in)
		}
		out = pipe.Out()
		if scale <= 0 {
			scale = max(1, (64+out.W-1)/out.W)
		}
		boxW, boxH = out.W*scale, out.H*scale
	}
	cols := o.Columns
	if cols <= 0 {
		cols = 8
	}
	cols = min(cols, len(indices))
	rows := (len(indices) + cols - 1) / cols
	cw, ch := boxW, boxH
	if o.Captions {
		cw = max(cw, 7*6) // room for "123456" and a short class name
		ch += captionH
	}
	if int64(cols*(cw+gap)+gap)*int64(rows*(ch+gap)+gap) > 1<<28 {
		return nil, fmt.Errorf("inspect: a %d×%d sheet of %dx%d cells is too large; lower the scale or the samples", cols, rows, cw, ch)
	}
	sheet := image.NewRGBA(image.Rect(0, 0, cols*(cw+gap)+gap, rows*(ch+gap)+gap))
	draw.Draw(sheet, sheet.Bounds(), &image.Uniform{background}, image.Point{}, draw.Src)
	scratch := make([]byte, scratchBytes(src))
	var pix []byte
	if pipe != nil {
		pix = make([]byte, out.Bytes())
	}
	var sc augment.Scratch
	ds := &drawSized{pipe: pipe, seed: o.Seed, epoch: o.Epoch}
	classes := src.Classes()
	for k, idx := range indices {
		x0, y0 := gap+(k%cols)*(cw+gap), gap+(k/cols)*(ch+gap)
		var label int32
		var err error
		switch {
		case thumbs:
			var p []byte
			var dec loader.Decoded
			if label, p, dec, err = ss.SampleSized(idx, scratch, thumbScale{boxW}); err == nil {
				h, w := dec.H, dec.W
				sh, sw := augment.ScaledSize(h, w, dec.Scale)
				th, tw := thumbSize(h, w, boxW)
				drawThumb(sheet, x0, y0, boxW, p, sh, sw, in.C, th, tw)
			}
		case varying:
			if label, err = ds.sample(ss, idx, scratch, pix, &sc); err == nil {
				blit(sheet, x0, y0, pix, out, scale)
			}
		default:
			var sample []byte
			if label, sample, err = src.Sample(idx, scratch); err == nil {
				if err = pipe.Apply(pix, sample, pipe.Draw(o.Seed, o.Epoch, idx)); err == nil {
					blit(sheet, x0, y0, pix, out, scale)
				}
			}
		}
		name := ""
		if err != nil {
			name = "unreadable"
			fillRect(sheet, image.Rect(x0, y0, x0+boxW, y0+boxH), color.RGBA{160, 0, 0, 255})
		} else if int(label) < len(classes) && label >= 0 {
			name = classes[label]
		}
		if o.Captions {
			base := y0 + boxH + lineH - 2
			text(sheet, x0, base, fmt.Sprint(idx), cw)
			text(sheet, x0, base+lineH, name, cw)
		}
	}
	return sheet, nil
}

// blit draws HWC uint8 pixels (1 or 3 channels) scaled up at (x0, y0),
// through Pix directly.
func blit(dst *image.RGBA, x0, y0 int, pix []byte, s augment.Spec, scale int) {
	for y := range s.H * scale {
		row := dst.Pix[dst.PixOffset(x0, y0+y):]
		src := pix[(y/scale)*s.W*s.C:]
		for x := range s.W * scale {
			p := src[(x/scale)*s.C:]
			o := row[4*x : 4*x+4 : 4*x+4]
			if s.C == 1 {
				o[0], o[1], o[2] = p[0], p[0], p[0]
			} else {
				o[0], o[1], o[2] = p[0], p[1], p[2]
			}
			o[3] = 255
		}
	}
}

func fillRect(dst *image.RGBA, r image.Rectangle, c color.RGBA) {
	draw.Draw(dst, r, &image.Uniform{c}, image.Point{}, draw.Src)
}

// text writes s at baseline y, cut to fit width pixels.
func text(dst *image.RGBA, x, y int, s string, width int) {
	if n := width / 7; len(s) > n {
		s = s[:max(n, 0)]
	}
	d := font.Drawer{Dst: dst, Src: image.NewUniform(color.RGBA{220, 220, 220, 255}), Face: basicfont.Face7x13,
		Dot: fixed.P(x, y)}
	d.DrawString(s)
}
