package augment

import (
	"math"
	"unsafe"

	"github.com/loaderd/loaderd/client/sample"
)

// The kernel's tables: every value op is per channel and per pixel, so the
// whole value chain of a channel is a function of one byte, tabulated once
// as the output element's bits.

// value computes the float32 a pixel value v of channel c becomes under the
// value ops, exactly as torchvision does: each step rounds to float32.
func value(vals []Op, c int, v uint8) float32 {
	x, isFloat := float32(v), false
	for _, op := range vals {
		switch o := op.(type) {
		case ToTensor:
			x, isFloat = x/255, true
		case Output:
			if o.DType.IsFloat() && !isFloat {
				x, isFloat = x/255, true
			}
		case Normalize:
			m, s := o.at(c)
			x = (x - m) / s
		}
	}
	return x
}

func (p *Pipeline) buildTables(vals []Op, fill *[3]uint8) {
	le := isLittleEndian()
	switch p.out.DType {
	case sample.U8:
		p.lut8 = new([3][256]uint8)
	case sample.F16, sample.BF16:
		p.lut16 = new([3][256]uint16)
	case sample.F32:
		p.lut32 = new([3][256]uint32)
	}
	for c := range p.out.C {
		for v := range 256 {
			x := value(vals, c, uint8(v))
			switch p.out.DType {
			case sample.U8:
				p.lut8[c][v] = uint8(v) // no value op can apply (checked by Output)
			case sample.F16:
				p.lut16[c][v] = swap16(sample.Float16(x), le)
			case sample.BF16:
				p.lut16[c][v] = swap16(sample.BFloat16(x), le)
			case sample.F32:
				p.lut32[c][v] = swap32(math.Float32bits(x), le)
			}
		}
		switch p.out.DType.Size() {
		case 1:
			p.fill8[c] = p.lut8[c][fill[c]]
		case 2:
			p.fill16[c] = p.lut16[c][fill[c]]
		case 4:
			p.fill32[c] = p.lut32[c][fill[c]]
		}
	}
}

// asBytes reinterprets a table or fill of uint16/uint32 as byte arrays: the
// tables hold little-endian bytes in memory on any host (see swap16), and
// byte arrays need no alignment.
func asBytes[B any, P any](p *P) *B { return (*B)(unsafe.Pointer(p)) }

func isLittleEndian() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}

// swap16 and swap32 put a value's bytes in little-endian memory order, so
// the tables hold what the kernel stores natively and their memory reads as
// little-endian bytes.
func swap16(v uint16, le bool) uint16 {
	if le {
		return v
	}
	return v>>8 | v<<8
}

func swap32(v uint32, le bool) uint32 {
	if le {
		return v
	}
	return v>>24 | v>>8&0xff00 | v<<8&0xff0000 | v<<24
}
