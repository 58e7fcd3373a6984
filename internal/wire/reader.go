package trainer

import (
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// wireReader reads a protobuf message as gRPC hands it over: a list of
// buffers, one per HTTP/2 frame (16 KiB). Reading across them in place
// lets a batch's tensor be copied once, straight into the ring slot.
type wireReader struct {
	bufs    mem.BufferSlice
	next    int    // index of the buffer after cur
	cur     []byte // unread part of the current buffer
	pos     int    // bytes consumed so far
	scratch []byte // holds a small field that spans buffers
}

func (r *wireReader) reset(bufs mem.BufferSlice) {
	r.bufs, r.next, r.cur, r.pos = bufs, 0, nil, 0
}

// fill makes cur non-empty, or reports the end of the message.
func (r *wireReader) fill() bool {
	for len(r.cur) == 0 {
		if r.next >= len(r.bufs) {
			return false
		}
		r.cur = r.bufs[r.next].ReadOnlyData()
		r.next++
	}
	return true
}

func (r *wireReader) varint() (uint64, error) {
	var v uint64
	for shift := 0; shift < 64; shift += 7 {
		if !r.fill() {
			return 0, errMalformed
		}
		c := r.cur[0]
		r.cur = r.cur[1:]
		r.pos++
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v, nil
		}
	}
	return 0, errMalformed
}

// bytes returns the next n bytes contiguous: in place when they lie in
// one buffer, else gathered into scratch. Valid until the next call.
func (r *wireReader) bytes(n int) ([]byte, error) {
	if !r.fill() && n > 0 {
		return nil, errMalformed
	}
	if len(r.cur) >= n {
		b := r.cur[:n]
		r.cur, r.pos = r.cur[n:], r.pos+n
		return b, nil
	}
	r.scratch = grow(r.scratch, n)
	return r.scratch, r.copyTo(r.scratch)
}

// copyTo fills dst from the message, across buffers.
func (r *wireReader) copyTo(dst []byte) error {
	for len(dst) > 0 {
		if !r.fill() {
			return errMalformed
		}
		n := copy(dst, r.cur)
		dst, r.cur, r.pos = dst[n:], r.cur[n:], r.pos+n
	}
	return nil
}

func (r *wireReader) skip(n int) error {
	for n > 0 {
		if !r.fill() {
			return errMalformed
		}
		k := min(n, len(r.cur))
		r.cur, r.pos, n = r.cur[k:], r.pos+k, n-k
	}
	return nil
}

// skipUnless skips a field value of type typ unless typ is keep (whose
// value the caller reads). Groups are not part of proto3.
func (r *wireReader) skipUnless(typ, keep protowire.Type) error {
	if typ == keep {
		return nil
	}
	switch typ {
	case protowire.VarintType:
		_, err := r.varint()
		return err
	case protowire.Fixed32Type:
		return r.skip(4)
	case protowire.Fixed64Type:
		return r.skip(8)
	case protowire.BytesType:
		n, err := r.varint()
		if err != nil {
			return err
		}
		return r.skip(int(n))
	}
	return errMalformed
}
