package cuda

import "github.com/loaderd/loaderd/trainer/cuda/driver"

// reduceMinPerBlock is the fewest elements a block of a split channel
// reduction sums: below it a block's start-up outweighs its share.
const reduceMinPerBlock = 1 << 14

// maxSplits bounds the blocks per channel (and the partial sums).
const maxSplits = 64

// reduceSplits returns how many blocks share each channel's reduction over
// outer×inner elements: enough for about four blocks per multiprocessor
// in all, but each with at least reduceMin elements and one outer index.
func (d *Device) reduceSplits(outer, c, inner int) int {
	if d.sms <= 0 {
		return 1
	}
	want := (4*d.sms + c - 1) / c
	per := int64(outer) * int64(inner) / int64(max(1, d.reduceMin))
	return int(max(1, min(int64(want), int64(outer), per, maxSplits)))
}

// splitReduce launches a channel reduction kernel whose arguments are
// queued up to (but not including) its partial-sum buffer and split
// count, over c·splits blocks; with splits > 1 a second kernel adds the
// partial sums into za and zb (zb 0 for a one-output reduction).
func (d *Device) splitReduce(op string, k kern, za, zb driver.DevicePtr, outer, c, inner int) {
	if !d.enter() {
		d.na = 0
		return
	}
	defer d.leave()
	splits := d.reduceSplits(outer, c, inner)
	var part driver.DevicePtr
	if splits > 1 {
		var ok bool
		if part, ok = d.partials(2 * c * splits); !ok {
			d.na = 0
			return
		}
	}
	d.ptr(part)
	d.i32(splits)
	d.launch(op, k, uint32(c*splits))
	if splits > 1 {
		d.ptr(za)
		d.ptr(zb)
		d.ptr(part)
		d.i32(c)
		d.i32(splits)
		d.launch(op+" parts", kChanParts, grid(int64(c)))
	}
}

// partials returns the partial-sum buffer with room for n doubles,
// growing it (after the queued work that may use it) when it has less.
// The reductions that share it are ordered on the one stream.
func (d *Device) partials(n int) (driver.DevicePtr, bool) {
	if n <= d.partLen {
		return d.part, true
	}
	if d.part != 0 {
		d.fail(d.cu.Check("cuStreamSynchronize", d.cu.StreamSynchronize(d.stream)))
		d.cu.MemFree(d.part)
		d.part, d.partLen = 0, 0
	}
	n = max(n, 2*maxSplits*512)
	var p driver.DevicePtr
	if err := d.cu.Check("cuMemAlloc (reduction partials)", d.cu.MemAlloc(&p, uint64(n)*8)); err != nil {
		d.fail(err)
		return 0, false
	}
	d.part, d.partLen = p, n
	return p, true
}
