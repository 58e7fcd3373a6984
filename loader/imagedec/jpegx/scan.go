package jpegx

// decodeScan decodes the scan whose entropy-coded data starts at pos into
// the component planes, then converts them to RGB in dst.
func (d *Decoder) decodeScan(data []byte, pos int, dst []byte) error {
	br := &d.br
	br.reset(data, pos)
	// A block is decoded into a zeroed d.blk and zeroed again after its
	// IDCT; an image given up halfway leaves coefficients behind.
	d.blk = [64]int32{}
	mx, my := d.comp[0].bw/d.comp[0].h, d.comp[0].bh/d.comp[0].v
	left, rst := d.ri, byte(0)
	for y := range my {
		for x := range mx {
			if d.ri > 0 {
				if left == 0 {
					if !br.atMarker(0xd0 + rst) {
						return ErrUnsupported
					}
					br.reset(data, br.marker+1)
					rst = (rst + 1) & 7
					left = d.ri
					for i := range d.nc {
						d.comp[i].pred = 0
					}
				}
				left--
			}
			for i := range d.nc {
				c := &d.comp[i]
				dc, ac, q := &d.huff[0][c.td], &d.huff[1][c.ta], &d.qt[c.tq]
				stride := c.stride
				for v := range c.v {
					for h := range c.h {
						last, ok := br.decodeBlock(&d.blk, dc, ac, q, &c.pred)
						if !ok {
							return ErrUnsupported
						}
						at := c.off + ((y*c.v+v)*stride+x*c.h+h)*8
						if last == 0 {
							idctDC(d.plane[at:], stride, d.blk[0])
							d.blk[0] = 0
							continue
						}
						ok = idct(d.plane[at:], stride, &d.blk)
						d.blk = [64]int32{}
						if !ok {
							return ErrUnsupported
						}
					}
				}
			}
		}
	}
	if !br.atMarker(0xd9) {
		return ErrUnsupported // not EOI next: stray data or more scans
	}
	d.toRGB(dst)
	return nil
}
