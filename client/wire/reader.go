package wire

import (
	"fmt"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// reader reads a protobuf message as gRPC hands it over: a list of
// buffers, one per HTTP/2 frame (16 KiB), or cut anywhere else. Reading
// across them in place lets a batch's tensor be copied once, straight into
// the caller's buffer. Every rule it applies is protowire's (and so
// proto.Unmarshal's): varints of at most 10 bytes, lengths within the
// enclosing message, field numbers 1 to MaxValidNumber.
type reader struct {
	bufs    mem.BufferSlice
	next    int    // index of the buffer after cur
	cur     []byte // unread part of the current buffer
	pos     int    // bytes consumed so far
	size    int    // bytes in the message
	scratch []byte // holds a small field that spans buffers
}

func (r *reader) reset(bufs mem.BufferSlice) {
	r.bufs, r.next, r.cur, r.pos, r.size = bufs, 0, nil, 0, bufs.Len()
}

// fill makes cur non-empty, or reports the end of the message.
func (r *reader) fill() bool {
	for len(r.cur) == 0 {
		if r.next >= len(r.bufs) {
			return false
		}
		r.cur = r.bufs[r.next].ReadOnlyData()
		r.next++
	}
	return true
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
}

var (
	errTruncated = malformed("truncated message")
	errOverflow  = malformed("varint longer than 64 bits")
)

func (r *reader) varint() (uint64, error) {
	if len(r.cur) > 0 {
		v, n := protowire.ConsumeVarint(r.cur)
		if n > 0 {
			r.cur, r.pos = r.cur[n:], r.pos+n
			return v, nil
		}
		if len(r.cur) >= protowire.SizeVarint(1<<63) {
			return 0, errOverflow
		}
	}
	// The varint spans buffers (or ends the message early): gather it.
	var buf [10]byte
	k := 0
	for k < len(buf) {
		if !r.fill() {
			return 0, errTruncated
		}
		c := r.cur[0]
		r.cur, r.pos = r.cur[1:], r.pos+1
		buf[k] = c
		k++
		if c < 0x80 {
			break
		}
	}
	v, n := protowire.ConsumeVarint(buf[:k])
	if n < 0 {
		return 0, errOverflow
	}
	return v, nil
}

// tag reads a field's tag in a message (not in a group): a field number
// from 1 to MaxValidNumber, and no end-group marker, as proto.Unmarshal
// requires.
func (r *reader) tag() (protowire.Number, protowire.Type, error) {
	v, err := r.varint()
	if err != nil {
		return 0, 0, err
	}
	num, typ := v>>3, protowire.Type(v&7)
	if num < uint64(protowire.MinValidNumber) || num > uint64(protowire.MaxValidNumber) {
		return 0, 0, malformed("field number %d", num)
	}
	if typ == protowire.EndGroupType {
		return 0, 0, malformed("end of group %d outside a group", num)
	}
	return protowire.Number(num), typ, nil
}

// length reads a length prefix and checks it against end, the byte
// offset where the enclosing message ends.
func (r *reader) length(end int) (int, error) {
	n, err := r.varint()
	if err != nil {
		return 0, err
	}
	// The varint itself may have run past end.
	if r.pos > end || n > uint64(end-r.pos) {
		return 0, malformed("length %d at byte %d runs past the end of its message at %d", n, r.pos, end)
	}
	return int(n), nil
}

// bytes returns the next length-prefixed field value contiguous: in place
// when it lies in one buffer, else gathered into scratch. It is valid
// until the next call.
func (r *reader) bytes(end int) ([]byte, error) {
	n, err := r.length(end)
	if err != nil {
		return nil, err
	}
	r.fill()
	if len(r.cur) >= n {
		b := r.cur[:n]
		r.cur, r.pos = r.cur[n:], r.pos+n
		return b, nil
	}
	r.scratch = grow(r.scratch, n)
	return r.scratch, r.copyTo(r.scratch)
}

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

// copyTo fills dst from the message, across buffers.
func (r *reader) copyTo(dst []byte) error {
	for len(dst) > 0 {
		if !r.fill() {
			return errTruncated
		}
		n := copy(dst, r.cur)
		dst, r.cur, r.pos = dst[n:], r.cur[n:], r.pos+n
	}
	return nil
}

func (r *reader) skip(n int) error {
	for n > 0 {
		if !r.fill() {
			return errTruncated
		}
		k := min(n, len(r.cur))
		r.cur, r.pos, n = r.cur[k:], r.pos+k, n-k
	}
	return nil
}

// skipValue skips the value of a field the decoder does not read, in a
// message that ends at byte end: unknown fields, and known ones with
// another wire type than their own, which proto.Unmarshal also keeps as
// unknown. Groups are not proto3, but parsers must skip them; depth bounds
// their nesting as protowire.ConsumeFieldValue does.
func (r *reader) skipValue(num protowire.Number, typ protowire.Type, end, depth int) error {
	switch typ {
	case protowire.VarintType:
		_, err := r.varint()
		return err
	case protowire.Fixed32Type:
		return r.skip(4)
	case protowire.Fixed64Type:
		return r.skip(8)
	case protowire.BytesType:
		n, err := r.length(end)
		if err != nil {
			return err
		}
		return r.skip(n)
	case protowire.StartGroupType:
		if depth < 0 {
			return malformed("groups nested too deep")
		}
		for {
			v, err := r.varint()
			if err != nil {
				return err
			}
			// protowire.ConsumeTag's rule inside a group: any number
			// from 1 to MaxInt32.
			num2, typ2 := protowire.DecodeTag(v)
			if num2 < protowire.MinValidNumber {
				return malformed("field number %d", v>>3)
			}
			if typ2 == protowire.EndGroupType {
				if num2 != num {
					return malformed("group %d ended as group %d", num, num2)
				}
				return nil
			}
			if err := r.skipValue(num2, typ2, end, depth-1); err != nil {
				return err
			}
		}
	}
	return malformed("field %d has wire type %d", num, typ)
}
