package client

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/loaderd/loaderd/client/sample"
	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// With StreamConfig.ValuesOnClient the daemon sends uint8 pixels and, in
// the header, a table per channel from a pixel byte to the output
// element's bits (Open.values_on_client); Batch.Values applies it. The
// table is the daemon's own, so the result is the bits the daemon would
// have sent: exact, not an approximation of normalize.

// valueTable is a header's table, parsed once per stream.
type valueTable struct {
	dtype sample.DType
	c     int
	raw   []byte // the header's bytes: C×256 elements, little-endian
	// Elements read from raw in native byte order, so that a native store
	// writes raw's little-endian bytes back on any host.
	lut8  [][256]uint8
	lut16 [][256]uint16
	lut32 [][256]uint32
	err   error
}

// ValuesOnClient reports whether the daemon sends uint8 pixels and the
// value table (the stream asked with StreamConfig.ValuesOnClient, and the
// daemon knows it). A daemon that predates values_on_client sends the
// spec's dtype and no table: its batches are delivered as they come, and
// Values copies them.
func (s *Stream) ValuesOnClient() bool { return len(s.Header().GetValueTable()) > 0 }

// checkValues checks the header's echo of values_on_client: U8 batches
// and a table of the right size, or (an older daemon) no table at all.
func checkValues(h *pb.StreamHeader, asked bool) error {
	t := h.GetValueTable()
	if len(t) == 0 {
		return nil
	}
	if !asked {
		return errors.New("client: the daemon sent a value table the stream did not ask for")
	}
	c, n := 0, sample.DType(h.GetValueDtype()).Size()
	if sh := h.GetSampleShape(); len(sh) == 3 {
		c = int(sh[0])
		if h.GetLayout() == pb.Layout_LAYOUT_HWC {
			c = int(sh[2])
		}
	}
	if h.GetDtype() != pb.DType_DTYPE_U8 || n == 0 || c < 1 || len(t) != c*256*n {
		return fmt.Errorf("client: value table of %d bytes of %v for %v samples of shape %v: want %d channels × 256 elements",
			len(t), h.GetValueDtype(), h.GetDtype(), h.GetSampleShape(), c)
	}
	return nil
}

// tableID names a value table briefly, for comparing headers in errors.
func tableID(t []byte) string {
	if len(t) == 0 {
		return ""
	}
	sum := sha256.Sum256(t)
	return fmt.Sprintf("%d bytes, sha256 %x", len(t), sum[:8])
}

func (s *Stream) valueTable() *valueTable {
	if t := s.values.Load(); t != nil {
		return t
	}
	// Reconnects and pool members must send the same table (connect,
	// sameStream), so the first one parsed serves the whole stream.
	h := s.Header()
	t := &valueTable{dtype: sample.DType(h.GetValueDtype()), raw: h.GetValueTable()}
	t.err = checkValues(h, true)
	if size := t.dtype.Size(); t.err == nil && size > 0 {
		t.c = len(t.raw) / (256 * size)
		switch size {
		case 1:
			t.lut8 = make([][256]uint8, t.c)
		case 2:
			t.lut16 = make([][256]uint16, t.c)
		case 4:
			t.lut32 = make([][256]uint32, t.c)
		}
		for c := range t.c {
			for v := range 256 {
				k := (c*256 + v) * size
				switch size {
				case 1:
					t.lut8[c][v] = t.raw[k]
				case 2:
					t.lut16[c][v] = binary.NativeEndian.Uint16(t.raw[k:])
				case 4:
					t.lut32[c][v] = binary.NativeEndian.Uint32(t.raw[k:])
				}
			}
		}
	}
	s.values.CompareAndSwap(nil, t)
	return s.values.Load()
}

// ValueDType is the element type of what Values returns: the spec's
// output type (for a stream without values on the client, DType).
func (b *Batch) ValueDType() sample.DType {
	if t := b.s.valueTable(); len(t.raw) > 0 && t.err == nil {
		return t.dtype
	}
	return b.DType
}

// Values returns the batch's tensor as the daemon makes it without
// ValuesOnClient: each byte of Data through its channel's table (its
// plane under CHW, its place mod C under HWC), in dst[:n], dst grown if
// its capacity is short. The tensor has Shape and Layout, and ValueDType
// elements, little-endian: the daemon's bytes, bit for bit. On a stream
// whose daemon applied the values itself (ValuesOnClient false) it is a
// copy of Data. It reads Data, so call it before Release; the result is
// the caller's. Values allocates nothing when dst is large enough and is
// safe for concurrent use.
func (b *Batch) Values(dst []byte) ([]byte, error) {
	t := b.s.valueTable()
	if len(t.raw) == 0 {
		return append(dst[:0], b.Data...), nil
	}
	if t.err != nil {
		return dst, t.err
	}
	size, n := t.dtype.Size(), len(b.Data)
	plane, ok := b.planes(t.c)
	if !ok {
		return dst, fmt.Errorf("client: batch %d: %d bytes of %v, shape %v: not the %d-channel u8 pixels of the value table", b.Seq, n, b.DType, b.Shape, t.c)
	}
	if cap(dst) < n*size {
		dst = make([]byte, n*size)
	}
	dst = dst[:n*size]
	hwc := b.Layout == sample.HWC
	aligned := uintptr(unsafe.Pointer(unsafe.SliceData(dst)))%uintptr(size) == 0
	switch {
	case size == 1:
		mapValues(dst, b.Data, t.lut8, plane, hwc)
	case size == 2 && aligned:
		mapValues(view[uint16](dst, n), b.Data, t.lut16, plane, hwc)
	case size == 4 && aligned:
		mapValues(view[uint32](dst, n), b.Data, t.lut32, plane, hwc)
	case size == 2: // byte arrays need no alignment
		mapValues(view[[2]byte](dst, n), b.Data, view[[256][2]byte](t.raw, t.c), plane, hwc)
	default:
		mapValues(view[[4]byte](dst, n), b.Data, view[[256][4]byte](t.raw, t.c), plane, hwc)
	}
	return dst, nil
}

// planes returns the pixels of one channel's plane, checking that the
// batch holds u8 images of c channels.
func (b *Batch) planes(c int) (int, bool) {
	if len(b.Shape) != 4 || b.DType != sample.U8 {
		return 0, false
	}
	ch, plane := b.Shape[1], b.Shape[2]*b.Shape[3]
	if b.Layout == sample.HWC {
		ch, plane = b.Shape[3], b.Shape[1]*b.Shape[2]
	}
	return plane, ch == c && plane > 0 && b.Shape[0]*plane*c == len(b.Data)
}

// view returns b's first n elements as []T; b is long enough and, for
// uint16 and uint32, aligned.
func view[T any](b []byte, n int) []T {
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

// pixels views an interleaved 3-channel buffer as whole pixels.
func pixels[T any](s []T) [][3]T {
	return unsafe.Slice((*[3]T)(unsafe.Pointer(unsafe.SliceData(s))), len(s)/3)
}

// mapValues maps src, images of len(lut) channels, into d (as long):
// plane by plane for CHW, with one channel's table per plane, and pixel
// by pixel for HWC. One channel is one plane in either layout.
func mapValues[T any](d []T, src []byte, lut [][256]T, plane int, hwc bool) {
	c := len(lut)
	switch {
	case hwc && c == 3:
		mapPixels(pixels(d), pixels(src), &lut[0], &lut[1], &lut[2])
	case hwc && c > 1: // no such images yet (augment takes 1 or 3 channels)
		for i, v := range src {
			d[i] = lut[i%c][v]
		}
	default:
		for i := 0; i < len(src); i += plane {
			mapPlane(d[i:i+plane], src[i:i+plane], &lut[i/plane%c])
		}
	}
}

// mapPlane maps one channel's bytes: a load, a table load and a store per
// element, bounds checked once (unrolling by eight measured slower).
func mapPlane[T any](d []T, s []byte, l *[256]T) {
	d = d[:len(s)]
	for i, v := range s {
		d[i] = l[v]
	}
}

// mapPixels maps interleaved 3-channel pixels. Storing the three elements
// through a pointer is about 30% faster than assigning a [3]T literal,
// which the compiler builds on the stack first.
func mapPixels[T any](d [][3]T, s [][3]byte, l0, l1, l2 *[256]T) {
	d = d[:len(s)]
	for i := range s {
		p, q := &s[i], &d[i]
		q[0], q[1], q[2] = l0[p[0]], l1[p[1]], l2[p[2]]
	}
}
