// Copyright 2009 The Go Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.
//
// Forked from Go 1.26 image/jpeg; see doc.go for what changed.

package jpegdec

import (
	"bytes"
	"image"
	"image/color"
)

// Decoder decodes JPEG images, reusing its state and image buffers.
// The zero value is ready to use.
type Decoder struct {
	d  decoder
	br bytes.Reader
}

// reset returns the decoder to image/jpeg's zero state, keeping the
// buffers that makeImg and processSOS reuse.
func (x *Decoder) reset(data []byte) *decoder {
	d := &x.d
	x.br.Reset(data)
	d.r = &x.br
	d.bits = bits{}
	d.bytes.i, d.bytes.j, d.bytes.nUnreadable = 0, 0, 0
	d.width, d.height = 0, 0
	d.img1, d.img3, d.blackPix, d.blackStride = nil, nil, nil, 0
	d.ri, d.nComp = 0, 0
	d.baseline, d.progressive = false, false
	d.jfif, d.adobeTransformValid, d.adobeTransform = false, false, 0
	d.eobRun = 0
	d.comp = [maxComponents]component{}
	d.progCoeffs = [maxComponents][]block{}
	for i := range d.huff {
		for j := range d.huff[i] {
			// A table a file never defines must stay undefined, not
			// keep the previous image's codes.
			d.huff[i][j].nCodes = 0
		}
	}
	d.quant = [maxTq + 1]block{}
	return d
}

// Decode decodes the JPEG image in data. The result is an *image.Gray, an
// *image.YCbCr, an *image.RGBA or an *image.CMYK, as from image/jpeg; it
// is valid until the next call.
func (x *Decoder) Decode(data []byte) (image.Image, error) {
	return x.reset(data).decode(&x.br, false)
}

// DecodeConfig returns the colour model and dimensions of the JPEG image
// in data without decoding it.
func (x *Decoder) DecodeConfig(data []byte) (image.Config, error) {
	d := x.reset(data)
	if _, err := d.decode(&x.br, true); err != nil {
		return image.Config{}, err
	}
	switch d.nComp {
	case 1:
		return image.Config{ColorModel: color.GrayModel, Width: d.width, Height: d.height}, nil
	case 3:
		cm := color.YCbCrModel
		if d.isRGB() {
			cm = color.RGBAModel
		}
		return image.Config{ColorModel: cm, Width: d.width, Height: d.height}, nil
	case 4:
		return image.Config{ColorModel: color.CMYKModel, Width: d.width, Height: d.height}, nil
	}
	return image.Config{}, FormatError("missing SOF marker")
}

// grow returns (*buf)[:n] cleared, reallocating only when it is too small.
func grow(buf *[]byte, n int) []byte {
	if cap(*buf) < n {
		*buf = make([]byte, n)
		return *buf
	}
	b := (*buf)[:n]
	clear(b)
	return b
}

// growBlocks is grow for coefficient blocks.
func growBlocks(buf *[]block, n int) []block {
	if cap(*buf) < n {
		*buf = make([]block, n)
		return *buf
	}
	b := (*buf)[:n]
	clear(b)
	return b
}
