package inspect

import (
	"context"
	"fmt"
	"image"
	"slices"
	"strings"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/internal/bytesize"
	"github.com/loaderd/loaderd/loader"
)

// A size=any source (a loader.SizedSource: Spec 0×0×C) has no one sample
// size: the report gives the spread of sizes over the samples looked at,
// the sheet draws thumbnails scaled to fit their cells, and an augmented
// sheet needs ops that open with resize, center_crop or
// random_resized_crop, as a stream of it does.

// SizeSamples is how many samples, evenly spread, Run measures the sizes
// of for a source of varying size when it does not Verify every one.
const SizeSamples = 64

// Sizes is the spread of image sizes over the samples measured.
type Sizes struct {
	Measured int64 // images whose size was read (unreadable ones are not)
	// Smallest, Median and Largest are width×height, by pixel count.
	Smallest, Median, Largest [2]int
	MinW, MedianW, MaxW       int
	MinH, MedianH, MaxH       int
}

// scratchBytes is what Sample and SampleSized need of scratch.
func scratchBytes(src loader.Source) int {
	if ss, ok := loader.As[loader.SizedSource](src); ok {
		return int(ss.MaxPixels()) * src.Spec().C
	}
	return src.Spec().Bytes()
}

// sizeStats summarises the sizes h×w (as [h, w] pairs).
func sizeStats(hw [][2]int) Sizes {
	s := Sizes{Measured: int64(len(hw))}
	if len(hw) == 0 {
		return s
	}
	byArea := slices.Clone(hw)
	slices.SortStableFunc(byArea, func(a, b [2]int) int { return a[0]*a[1] - b[0]*b[1] })
	wh := func(p [2]int) [2]int { return [2]int{p[1], p[0]} }
	s.Smallest, s.Median, s.Largest = wh(byArea[0]), wh(byArea[len(byArea)/2]), wh(byArea[len(byArea)-1])
	hs, ws := make([]int, len(hw)), make([]int, len(hw))
	for i, p := range hw {
		hs[i], ws[i] = p[0], p[1]
	}
	slices.Sort(hs)
	slices.Sort(ws)
	s.MinH, s.MedianH, s.MaxH = hs[0], hs[len(hs)/2], hs[len(hs)-1]
	s.MinW, s.MedianW, s.MaxW = ws[0], ws[len(ws)/2], ws[len(ws)-1]
	return s
}

// headerOnly asks for the smallest decode (1/8 where the decoder scales):
// only the size is wanted.
type headerOnly struct{}

func (headerOnly) Want(h, w int) loader.Want { return loader.Want{Scale: 8} }

// measure reads the sizes of SizeSamples samples spread over src.
func (r *Report) measure(ctx context.Context, ss loader.SizedSource) error {
	n := min(int64(SizeSamples), ss.Len())
	scratch := make([]byte, scratchBytes(ss))
	var hw [][2]int
	for k := range n {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if _, _, dec, err := ss.SampleSized(k*ss.Len()/n, scratch, headerOnly{}); err == nil {
			hw = append(hw, [2]int{dec.H, dec.W})
		}
	}
	r.Sizes = sizeStats(hw)
	return nil
}

// sizesString is the report's lines for images of varying size.
func (r Report) sizesString(b *strings.Builder) {
	fmt.Fprintf(b, "samples  %d images of varying size, %d channels %v %v", r.Len, r.Spec.C, r.Spec.DType, r.Spec.Layout)
	if r.FileBytes > 0 {
		fmt.Fprintf(b, " (%s on disk)", bytesize.Format(r.FileBytes))
	}
	b.WriteString("\n")
	s := r.Sizes
	if s.Measured == 0 {
		b.WriteString("sizes    none readable\n")
		return
	}
	of := "all"
	if s.Measured < r.Len {
		of = fmt.Sprintf("%d of %d", s.Measured, r.Len)
	}
	fmt.Fprintf(b, "sizes    W×H over %s samples: smallest %d×%d, median %d×%d, largest %d×%d\n", of,
		s.Smallest[0], s.Smallest[1], s.Median[0], s.Median[1], s.Largest[0], s.Largest[1])
	fmt.Fprintf(b, "         width %d–%d (median %d), height %d–%d (median %d); median %s decoded\n",
		s.MinW, s.MaxW, s.MedianW, s.MinH, s.MaxH, s.MedianH, bytesize.Format(int64(s.Median[0]*s.Median[1]*r.Spec.C)))
}

// errFixedAugment is the default augmentation asked of images of varying size.
func errFixedAugment(spec augment.Spec) error {
	return fmt.Errorf("inspect: images of varying size (%v): the default augmentation crop=SIZE:4,flip needs one size; "+
		"pass --augment opening with resize=, center_crop= or random_resized_crop=, e.g. random_resized_crop=224,flip", spec)
}

// thumbScale asks for the largest DCT scale at which an image still has
// at least as many pixels on each side as its thumbnail.
type thumbScale struct{ cell int }

func (t thumbScale) Want(h, w int) loader.Want {
	th, tw := thumbSize(h, w, t.cell)
	for _, d := range []int{8, 4, 2} {
		if sh, sw := augment.ScaledSize(h, w, d); sh >= th && sw >= tw {
			return loader.Want{Scale: d}
		}
	}
	return loader.Want{Scale: 1}
}

// thumbSize is an h×w image scaled to fit a cell×cell square, keeping
// its aspect, never enlarged.
func thumbSize(h, w, cell int) (int, int) {
	if h <= cell && w <= cell {
		return h, w
	}
	if h >= w {
		return cell, max(1, (w*cell+h/2)/h)
	}
	return max(1, (h*cell+w/2)/w), cell
}

// drawThumb draws pix, an sh×sw HWC image of c channels, averaged down
// (box filter) to th×tw and centred in the cell×cell square at (x0, y0).
func drawThumb(dst *image.RGBA, x0, y0, cell int, pix []byte, sh, sw, c, th, tw int) {
	x0, y0 = x0+(cell-tw)/2, y0+(cell-th)/2
	for y := range th {
		ya, yb := y*sh/th, max((y+1)*sh/th, y*sh/th+1)
		row := dst.Pix[dst.PixOffset(x0, y0+y):]
		for x := range tw {
			xa, xb := x*sw/tw, max((x+1)*sw/tw, x*sw/tw+1)
			var sum [3]int
			for sy := ya; sy < yb; sy++ {
				p := pix[(sy*sw+xa)*c : (sy*sw+xb)*c]
				for k := 0; k < len(p); k += c {
					if c == 1 {
						sum[0] += int(p[k])
					} else {
						sum[0], sum[1], sum[2] = sum[0]+int(p[k]), sum[1]+int(p[k+1]), sum[2]+int(p[k+2])
					}
				}
			}
			n := (yb - ya) * (xb - xa)
			if c == 1 {
				sum[1], sum[2] = sum[0], sum[0]
			}
			o := row[4*x : 4*x+4 : 4*x+4]
			o[0], o[1], o[2], o[3] = uint8((sum[0]+n/2)/n), uint8((sum[1]+n/2)/n), uint8((sum[2]+n/2)/n), 255
		}
	}
}

// drawSized is the worker's reading of an augmented sample of varying
// size: for the header's size, the scale of the params drawn for it
// (whole images: a sheet is no hot path); then the pipeline on what the
// source says it decoded.
type drawSized struct {
	pipe  *augment.Pipeline
	seed  uint64
	epoch int64
	idx   int64
}

func (d *drawSized) Want(h, w int) loader.Want {
	return loader.Want{Scale: d.pipe.Scale(h, w, d.pipe.DrawSized(d.seed, d.epoch, d.idx, h, w))}
}

// sample reads sample idx of ss and applies the pipeline into dst.
func (d *drawSized) sample(ss loader.SizedSource, idx int64, scratch, dst []byte, sc *augment.Scratch) (int32, error) {
	d.idx = idx
	label, pix, dec, err := ss.SampleSized(idx, scratch, d)
	if err != nil {
		return 0, err
	}
	prm := d.pipe.DrawSized(d.seed, d.epoch, idx, dec.H, dec.W)
	return label, d.pipe.ApplyDecoded(dst, pix, dec.H, dec.W, dec.Scale, dec.Box, prm, sc)
}
