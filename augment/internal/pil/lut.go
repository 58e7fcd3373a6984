package pil

import "encoding/binary"

// The ImageOps operations build a lookup table (per channel for the
// histogram ones) and apply it with Image.point.

// Invert performs F.invert: 255 - v.
func Invert(dst, src Image) {
	check(dst, src, 0)
	s, d := src.Pix[:src.n()], dst.Pix[:src.n()]
	for i, v := range s {
		d[i] = 255 - v
	}
}

// Posterize performs F.posterize, keeping the bits high bits of every
// value; bits must be in [0, 8].
func Posterize(dst, src Image, bits int) {
	check(dst, src, 0)
	if bits < 0 || bits > 8 {
		panic("pil: posterize bits outside [0, 8]")
	}
	mask := ^byte(1<<(8-bits) - 1)
	s, d := src.Pix[:src.n()], dst.Pix[:src.n()]
	// Eight bytes a step: the mask is the same for every byte.
	m8 := uint64(mask) * 0x0101010101010101
	for len(s) >= 8 {
		binary.LittleEndian.PutUint64(d, binary.LittleEndian.Uint64(s)&m8)
		s, d = s[8:], d[8:]
	}
	for i, v := range s {
		d[i] = v & mask
	}
}

// Solarize performs F.solarize: values at or above threshold are
// inverted.
func Solarize(dst, src Image, threshold float64) {
	check(dst, src, 0)
	var lut [256]byte
	for i := range lut {
		if float64(i) < threshold {
			lut[i] = byte(i)
		} else {
			lut[i] = byte(255 - i)
		}
	}
	applyLUT(dst.Pix, src.Pix[:src.n()], &lut)
}

// histograms counts every channel of src separately.
func histograms(h *[3][256]int, src Image) {
	s := src.Pix[:src.n()]
	if src.C == 1 {
		for _, v := range s {
			h[0][v]++
		}
		return
	}
	// Two pixels a step into two sets of counts, added at the end: runs
	// of equal values (flat regions) would otherwise make each increment
	// wait for the one before it, through memory.
	var h2 [2][3][256]uint32
	px := asPixels[[3]byte](src)
	for len(px) >= 2 {
		p, q := &px[0], &px[1]
		h2[0][0][p[0]]++
		h2[0][1][p[1]]++
		h2[0][2][p[2]]++
		h2[1][0][q[0]]++
		h2[1][1][q[1]]++
		h2[1][2][q[2]]++
		px = px[2:]
	}
	for _, p := range px {
		h2[0][0][p[0]]++
		h2[0][1][p[1]]++
		h2[0][2][p[2]]++
	}
	for c := range h {
		for v := range h[c] {
			h[c][v] = int(h2[0][c][v]) + int(h2[1][c][v])
		}
	}
}

// AutoContrast performs F.autocontrast (ImageOps.autocontrast, cutoff 0):
// per channel, the range from the lowest to the highest value present is
// stretched to [0, 255] with a float64 scale and truncation; a channel
// with a single value is left alone.
func AutoContrast(dst, src Image) {
	check(dst, src, 0)
	var h [3][256]int
	histograms(&h, src)
	var luts [3][256]byte
	for k := range src.C {
		lo, hi := 0, 255
		for lo < 256 && h[k][lo] == 0 {
			lo++
		}
		for hi >= 0 && h[k][hi] == 0 {
			hi--
		}
		identity(&luts[k])
		if hi <= lo {
			continue
		}
		scale := 255.0 / float64(hi-lo)
		offset := float64(float64(-lo) * scale) // rounded, so that no FMA takes it into the sum below (arm64)
		for i := range luts[k] {
			// The conversion keeps Python's separate rounding of the
			// product.
			v := int(float64(float64(i)*scale) + offset)
			luts[k][i] = byte(min(max(v, 0), 255))
		}
	}
	applyChannels(dst, src, &luts)
}

// Equalize performs F.equalize (ImageOps.equalize): per channel, a
// cumulative-histogram table whose step leaves out the count of the
// highest value present; channels with one value, or with too few pixels
// for a step, are left alone. Entries past 255 are clipped, as
// Image.point clips them.
func Equalize(dst, src Image) {
	check(dst, src, 0)
	var h [3][256]int
	histograms(&h, src)
	var luts [3][256]byte
	for k := range src.C {
		identity(&luts[k])
		nonzero, total, last := 0, 0, 0
		for _, c := range h[k] {
			if c != 0 {
				nonzero++
				total += c
				last = c
			}
		}
		if nonzero <= 1 {
			continue
		}
		step := (total - last) / 255
		if step == 0 {
			continue
		}
		n := step / 2
		for i := range luts[k] {
			luts[k][i] = byte(min(n/step, 255))
			n += h[k][i]
		}
	}
	applyChannels(dst, src, &luts)
}

func identity(lut *[256]byte) {
	for i := range lut {
		lut[i] = byte(i)
	}
}

func applyChannels(dst, src Image, luts *[3][256]byte) {
	if src.C == 1 {
		applyLUT(dst.Pix, src.Pix[:src.n()], &luts[0])
		return
	}
	applyLUT3(dst.Pix, src.Pix[:src.n()], luts)
}
