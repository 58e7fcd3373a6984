package wire

import (
	"errors"
	"fmt"
	"math"

	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the "proto" codec ClientCodec delegates to
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

var (
	// ErrMalformed reports bytes that are not a valid StreamReply: the
	// messages proto.Unmarshal rejects.
	ErrMalformed = errors.New("wire: malformed StreamReply")
	// ErrTooLarge reports an inline tensor longer than the Decoder's Dst.
	ErrTooLarge = errors.New("wire: batch tensor larger than its buffer")
	// ErrNoBatch reports a batch message to a Decoder without a Batch:
	// a batch before the stream's header.
	ErrNoBatch = errors.New("wire: batch before the stream header")
)

// ClientCodec is the client's gRPC codec. It speaks standard protobuf on
// the wire, through gRPC's own "proto" codec, except that it decodes a
// StreamReply into a *Decoder itself: the generic decoder would allocate a
// fresh batch-sized []byte per message, and fresh memory costs about 10 µs
// a page here, 7 ms for a 3 MiB batch. Use it per call, with
// grpc.ForceCodecV2(ClientCodec{}), and pass a *Decoder to RecvMsg.
type ClientCodec struct{}

var protoCodec = encoding.GetCodecV2("proto")

// Name is "proto": the daemon sees the standard content type.
func (ClientCodec) Name() string { return "proto" }

// Marshal marshals v with gRPC's proto codec.
func (ClientCodec) Marshal(v any) (mem.BufferSlice, error) { return protoCodec.Marshal(v) }

// Unmarshal decodes data into v: a *Decoder decodes a StreamReply, and
// anything else goes to gRPC's proto codec.
func (ClientCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if d, ok := v.(*Decoder); ok {
		return d.Decode(data)
	}
	return protoCodec.Unmarshal(data, v)
}

// Batch is a loaderd.v1.Batch as a Decoder leaves it. Its slices keep
// their arrays from one decode to the next, so a Batch reused for every
// message of a stream allocates only while they grow.
type Batch struct {
	Seq     uint64
	Epoch   int64
	Index   int64 // batch_index
	Indices []int64
	Labels  []int32
	DType   pb.DType
	Layout  pb.Layout
	Shape   []int64
	// The tensor, a oneof: Data is non-nil for an inline tensor (a prefix
	// of the Decoder's Dst, perhaps empty); HasShm is set for a tensor in
	// shared memory, and then Shm locates it. Neither: the batch has none.
	Data   []byte
	Shm    ShmRef
	HasShm bool
	// Params are the samples' augmentation choices, HasParams whether the
	// batch carried them (it does iff Open.include_params).
	Params    Params
	HasParams bool
	// Mix is the batch's mixup or cutmix record, HasMix whether it carried
	// one (it does iff StreamHeader.batch_mix).
	Mix    Mix
	HasMix bool
	// The extra fields (StreamHeader.field_names): FieldData[f] is field
	// f's values back to back, copied out of the message into arrays kept
	// from decode to decode; FieldEnds and FieldPresent are f-major, N
	// per field. LabelSets and LabelSetEnds are the label sets of a
	// multi-label stream. Their lengths are as sent: the client checks them.
	FieldData    [][]byte
	FieldEnds    []uint32
	FieldPresent []bool
	LabelSets    []int32
	LabelSetEnds []uint32
}

// Mix is a loaderd.v1.MixRecord.
type Mix struct {
	Kind                                 pb.MixKind
	Lam                                  float64
	BoxTop, BoxLeft, BoxHeight, BoxWidth int32
}

// ShmRef is a loaderd.v1.ShmRef: where a batch's tensor lies in the
// daemon's shared region.
type ShmRef struct {
	Slot       uint32
	Generation uint64
	Offset     int64
	Length     int64
}

// Params is a loaderd.v1.AugmentParams: parallel lists, one entry per
// sample. Height and Width are empty unless the pipeline resamples; then
// (Top, Left, Height, Width) is each sample's box. The photometric
// fields are empty unless the pipeline has those ops (JitterOrder and
// Jitter four entries per sample, Op and Magnitude NumOps[i] for sample
// i, one after the other), the erasing fields unless it erases.
type Params struct {
	Top, Left     []int32
	Flip          []bool
	Height, Width []int32

	JitterOrder []uint32
	Jitter      []float32
	Gray        []bool
	Sigma       []float32
	NumOps, Op  []uint32
	Magnitude   []float32
	Erased      []bool
	EraseTop    []int32
	EraseLeft   []int32
	EraseHeight []int32
	EraseWidth  []int32
	EraseNoise  []uint64
}

// reset clears b as proto.Unmarshal clears a message it decodes into.
func (b *Batch) reset() {
	p := &b.Params
	*b = Batch{Indices: b.Indices[:0], Labels: b.Labels[:0], Shape: b.Shape[:0],
		FieldData: b.FieldData[:0], FieldEnds: b.FieldEnds[:0], FieldPresent: b.FieldPresent[:0],
		LabelSets: b.LabelSets[:0], LabelSetEnds: b.LabelSetEnds[:0],
		Params: Params{Top: p.Top[:0], Left: p.Left[:0], Flip: p.Flip[:0],
			Height: p.Height[:0], Width: p.Width[:0],
			JitterOrder: p.JitterOrder[:0], Jitter: p.Jitter[:0], Gray: p.Gray[:0], Sigma: p.Sigma[:0],
			NumOps: p.NumOps[:0], Op: p.Op[:0], Magnitude: p.Magnitude[:0], Erased: p.Erased[:0],
			EraseTop: p.EraseTop[:0], EraseLeft: p.EraseLeft[:0], EraseHeight: p.EraseHeight[:0],
			EraseWidth: p.EraseWidth[:0], EraseNoise: p.EraseNoise[:0]}}
}

// Decoder decodes the StreamReply messages of one stream as gRPC hands
// them over, in pieces, reading across them in place: a batch's inline
// tensor is copied once, from gRPC's buffers into Dst. Set Batch and Dst
// before each Decode (ClientCodec calls it from RecvMsg); Decode sets
// Header and HasBatch.
//
// It accepts exactly the messages proto.Unmarshal accepts, with the same
// result (a repeated field appends, a repeated message merges, the last
// oneof case wins), except that:
//   - unknown fields are skipped, not kept (on every level, the header's
//     included): an old client reads a newer daemon's messages;
//   - an inline tensor longer than Dst fails with ErrTooLarge, even when a
//     later field of the same batch replaces it;
//   - a batch when Batch is nil fails with ErrNoBatch.
//
// A Decoder may be reused, and must not be used concurrently.
type Decoder struct {
	// Batch receives a batch message. Its contents are unspecified after a
	// Decode that did not set HasBatch.
	Batch *Batch
	// Dst receives a batch's inline tensor: Batch.Data is Dst[:n:n].
	Dst []byte

	// Header is the message's stream header, nil when it carried none.
	Header *pb.StreamHeader
	// HasBatch reports that the message was a batch, now in Batch.
	HasBatch bool

	r reader
}

// headerOptions decode a StreamHeader as proto.Unmarshal would inside a
// StreamReply: one level of recursion is spent on the reply.
var headerOptions = proto.UnmarshalOptions{Merge: true, DiscardUnknown: true,
	RecursionLimit: protowire.DefaultRecursionLimit - 1}

// noBytes is an empty inline tensor when Dst is nil: set, unlike nil.
var noBytes = []byte{}

// Decode decodes one StreamReply from data. A message with neither a
// header nor a batch (empty, or holding only fields this client does not
// know) sets neither Header nor HasBatch.
func (d *Decoder) Decode(data mem.BufferSlice) error {
	d.Header, d.HasBatch = nil, false
	d.r.reset(data)
	err := d.decode()
	d.r.reset(nil) // gRPC frees data after Unmarshal
	if err != nil {
		d.Header, d.HasBatch = nil, false
	}
	return err
}

func (d *Decoder) decode() error {
	r := &d.r
	for r.pos < r.size {
		num, typ, err := r.tag()
		if err != nil {
			return err
		}
		switch {
		case num == ReplyHeader && typ == protowire.BytesType:
			v, err := r.bytes(r.size)
			if err != nil {
				return err
			}
			if d.Header == nil { // first, or after a batch: the oneof's last case wins
				d.Header, d.HasBatch = &pb.StreamHeader{}, false
			}
			if err := headerOptions.Unmarshal(v, d.Header); err != nil {
				return fmt.Errorf("%w: stream header: %w", ErrMalformed, err)
			}
		case num == ReplyBatch && typ == protowire.BytesType:
			n, err := r.length(r.size)
			if err != nil {
				return err
			}
			if d.Batch == nil {
				return ErrNoBatch
			}
			if !d.HasBatch { // a second batch field merges into the first
				d.Batch.reset()
			}
			d.Header, d.HasBatch = nil, true
			if err := d.decodeBatch(r.pos + n); err != nil {
				return err
			}
		default:
			if err := r.skipValue(num, typ, r.size, protowire.DefaultRecursionLimit); err != nil {
				return err
			}
		}
	}
	return nil
}

// decodeBatch reads Batch fields into d.Batch up to byte end.
func (d *Decoder) decodeBatch(end int) error {
	r, b := &d.r, d.Batch
	for r.pos < end {
		num, typ, err := r.tag()
		if err != nil {
			return err
		}
		if ok, err := d.batchField(b, num, typ, end); err != nil {
			return err
		} else if !ok {
			if err := r.skipValue(num, typ, end, protowire.DefaultRecursionLimit); err != nil {
				return err
			}
		}
	}
	if r.pos != end {
		return malformed("batch runs %d bytes past its length", r.pos-end)
	}
	return nil
}

// batchField reads one field of a Batch, unless it is unknown or has
// another wire type than its own (then the caller skips it).
func (d *Decoder) batchField(b *Batch, num protowire.Number, typ protowire.Type, end int) (bool, error) {
	r := &d.r
	if typ == protowire.VarintType {
		switch num {
		case BatchSeq, BatchEpoch, BatchIndex, BatchIndices, BatchLabels, BatchDType, BatchLayout, BatchShape,
			BatchFieldEnds, BatchFieldPresent, BatchLabelSets, BatchLabelSetEnds:
		default:
			return false, nil
		}
		v, err := r.varint()
		if err != nil {
			return true, err
		}
		switch num {
		case BatchSeq:
			b.Seq = v
		case BatchEpoch:
			b.Epoch = int64(v)
		case BatchIndex:
			b.Index = int64(v)
		case BatchIndices:
			b.Indices = append(b.Indices, int64(v))
		case BatchLabels:
			b.Labels = append(b.Labels, int32(v))
		case BatchDType:
			b.DType = pb.DType(int32(v))
		case BatchLayout:
			b.Layout = pb.Layout(int32(v))
		case BatchShape:
			b.Shape = append(b.Shape, int64(v))
		case BatchFieldEnds:
			b.FieldEnds = append(b.FieldEnds, uint32(v))
		case BatchFieldPresent:
			b.FieldPresent = append(b.FieldPresent, protowire.DecodeBool(v))
		case BatchLabelSets:
			b.LabelSets = append(b.LabelSets, int32(v))
		case BatchLabelSetEnds:
			b.LabelSetEnds = append(b.LabelSetEnds, uint32(v))
		}
		return true, nil
	}
	if typ != protowire.BytesType {
		return false, nil
	}
	switch num {
	case BatchData:
		n, err := r.length(end)
		if err != nil {
			return true, err
		}
		if n > len(d.Dst) {
			return true, fmt.Errorf("%w: %d bytes, the buffer holds %d", ErrTooLarge, n, len(d.Dst))
		}
		b.Data, b.Shm, b.HasShm = d.Dst[:n:n], ShmRef{}, false
		if b.Data == nil {
			b.Data = noBytes
		}
		return true, r.copyTo(b.Data)
	case BatchIndices, BatchLabels, BatchShape, BatchShm, BatchParams, BatchMix,
		BatchFieldData, BatchFieldEnds, BatchFieldPresent, BatchLabelSets, BatchLabelSetEnds:
	default:
		return false, nil
	}
	v, err := r.bytes(end)
	if err != nil {
		return true, err
	}
	ok := true
	switch num {
	case BatchIndices:
		b.Indices, ok = appendPacked(b.Indices, v)
	case BatchLabels:
		b.Labels, ok = appendPacked(b.Labels, v)
	case BatchShape:
		b.Shape, ok = appendPacked(b.Shape, v)
	case BatchShm:
		if !b.HasShm { // a second shm field merges into the first
			b.Data, b.Shm, b.HasShm = nil, ShmRef{}, true
		}
		return true, b.Shm.decode(v)
	case BatchParams:
		b.HasParams = true
		return true, b.Params.decode(v)
	case BatchMix:
		b.HasMix = true // a second mix field merges into the first
		return true, b.Mix.decode(v)
	case BatchFieldData:
		b.FieldData = appendBytes(b.FieldData, v)
	case BatchFieldEnds:
		b.FieldEnds, ok = appendPacked(b.FieldEnds, v)
	case BatchFieldPresent:
		b.FieldPresent, ok = appendPackedBool(b.FieldPresent, v)
	case BatchLabelSets:
		b.LabelSets, ok = appendPacked(b.LabelSets, v)
	case BatchLabelSetEnds:
		b.LabelSetEnds, ok = appendPacked(b.LabelSetEnds, v)
	}
	if !ok {
		return true, malformed("packed field %d", num)
	}
	return true, nil
}

// appendBytes appends a copy of v to s, reusing the array of the entry it
// grows into, as reset left it: v is a view of gRPC's buffers.
func appendBytes(s [][]byte, v []byte) [][]byte {
	n := len(s)
	if n < cap(s) {
		s = s[:n+1]
	} else {
		s = append(s, nil)
	}
	s[n] = append(s[n][:0], v...)
	return s
}

// appendPacked appends the varints of a packed repeated field, truncated
// to T as proto.Unmarshal does for int32.
func appendPacked[T int32 | int64 | uint32](s []T, b []byte) ([]T, bool) {
	for len(b) > 0 {
		v, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return s, false
		}
		s = append(s, T(v))
		b = b[n:]
	}
	return s, true
}

// consumeTag is reader.tag on a contiguous message.
func consumeTag(b []byte) (protowire.Number, protowire.Type, int, error) {
	v, n := protowire.ConsumeVarint(b)
	if n < 0 {
		return 0, 0, 0, malformed("bad tag: %v", protowire.ParseError(n))
	}
	num, typ := v>>3, protowire.Type(v&7)
	if num < uint64(protowire.MinValidNumber) || num > uint64(protowire.MaxValidNumber) {
		return 0, 0, 0, malformed("field number %d", num)
	}
	if typ == protowire.EndGroupType {
		return 0, 0, 0, malformed("end of group %d outside a group", num)
	}
	return protowire.Number(num), typ, n, nil
}

// field is one field of a small contiguous message.
type field struct {
	num protowire.Number
	typ protowire.Type
	v   uint64 // a varint's or a fixed32's or fixed64's value
	b   []byte // a length-prefixed value
}

// consumeField reads one field of a contiguous message, skipping the
// value of a group, and returns its length.
func consumeField(b []byte) (field, int, error) {
	num, typ, n, err := consumeTag(b)
	if err != nil {
		return field{}, 0, err
	}
	f := field{num: num, typ: typ}
	var m int
	switch typ {
	case protowire.VarintType:
		f.v, m = protowire.ConsumeVarint(b[n:])
	case protowire.BytesType:
		f.b, m = protowire.ConsumeBytes(b[n:])
	case protowire.Fixed32Type:
		var v uint32
		v, m = protowire.ConsumeFixed32(b[n:])
		f.v = uint64(v)
	case protowire.Fixed64Type:
		f.v, m = protowire.ConsumeFixed64(b[n:])
	default:
		m = protowire.ConsumeFieldValue(num, typ, b[n:])
	}
	if m < 0 {
		return field{}, 0, malformed("field %d: %v", num, protowire.ParseError(m))
	}
	return f, n + m, nil
}

// decode merges a ShmRef message into s. Its fields are varints; others,
// and known fields with another wire type, are skipped.
func (s *ShmRef) decode(b []byte) error {
	for len(b) > 0 {
		f, n, err := consumeField(b)
		if err != nil {
			return err
		}
		b = b[n:]
		if f.typ != protowire.VarintType {
			continue
		}
		switch f.num {
		case ShmSlot:
			s.Slot = uint32(f.v)
		case ShmGeneration:
			s.Generation = f.v
		case ShmOffset:
			s.Offset = int64(f.v)
		case ShmLength:
			s.Length = int64(f.v)
		}
	}
	return nil
}

// decode merges a MixRecord message into m. A field with another wire
// type than its own, or unknown, is skipped.
func (m *Mix) decode(b []byte) error {
	for len(b) > 0 {
		f, n, err := consumeField(b)
		if err != nil {
			return err
		}
		b = b[n:]
		if f.num == MixLam {
			if f.typ == protowire.Fixed64Type {
				m.Lam = math.Float64frombits(f.v)
			}
			continue
		}
		if f.typ != protowire.VarintType {
			continue
		}
		switch f.num {
		case MixKind:
			m.Kind = pb.MixKind(int32(f.v))
		case MixBoxTop:
			m.BoxTop = int32(f.v)
		case MixBoxLeft:
			m.BoxLeft = int32(f.v)
		case MixBoxHeight:
			m.BoxHeight = int32(f.v)
		case MixBoxWidth:
			m.BoxWidth = int32(f.v)
		}
	}
	return nil
}

// decode merges an AugmentParams message into p. Its fields are repeated
// varints, floats or fixed64s, packed or not; a field with another wire
// type is skipped.
func (p *Params) decode(b []byte) error {
	for len(b) > 0 {
		f, n, err := consumeField(b)
		if err != nil {
			return err
		}
		b = b[n:]
		ok := true
		switch f.typ {
		case protowire.VarintType:
			switch f.num {
			case ParamsTop:
				p.Top = append(p.Top, int32(f.v))
			case ParamsLeft:
				p.Left = append(p.Left, int32(f.v))
			case ParamsFlip:
				p.Flip = append(p.Flip, protowire.DecodeBool(f.v))
			case ParamsHeight:
				p.Height = append(p.Height, int32(f.v))
			case ParamsWidth:
				p.Width = append(p.Width, int32(f.v))
			case ParamsJitterOrder:
				p.JitterOrder = append(p.JitterOrder, uint32(f.v))
			case ParamsGray:
				p.Gray = append(p.Gray, protowire.DecodeBool(f.v))
			case ParamsNumOps:
				p.NumOps = append(p.NumOps, uint32(f.v))
			case ParamsOp:
				p.Op = append(p.Op, uint32(f.v))
			case ParamsErased:
				p.Erased = append(p.Erased, protowire.DecodeBool(f.v))
			case ParamsEraseTop:
				p.EraseTop = append(p.EraseTop, int32(f.v))
			case ParamsEraseLeft:
				p.EraseLeft = append(p.EraseLeft, int32(f.v))
			case ParamsEraseHeight:
				p.EraseHeight = append(p.EraseHeight, int32(f.v))
			case ParamsEraseWidth:
				p.EraseWidth = append(p.EraseWidth, int32(f.v))
			}
		case protowire.Fixed32Type:
			switch f.num {
			case ParamsJitter:
				p.Jitter = append(p.Jitter, math.Float32frombits(uint32(f.v)))
			case ParamsSigma:
				p.Sigma = append(p.Sigma, math.Float32frombits(uint32(f.v)))
			case ParamsMagnitude:
				p.Magnitude = append(p.Magnitude, math.Float32frombits(uint32(f.v)))
			}
		case protowire.Fixed64Type:
			if f.num == ParamsEraseNoise {
				p.EraseNoise = append(p.EraseNoise, f.v)
			}
		case protowire.BytesType:
			switch f.num {
			case ParamsTop:
				p.Top, ok = appendPacked(p.Top, f.b)
			case ParamsLeft:
				p.Left, ok = appendPacked(p.Left, f.b)
			case ParamsFlip:
				p.Flip, ok = appendPackedBool(p.Flip, f.b)
			case ParamsHeight:
				p.Height, ok = appendPacked(p.Height, f.b)
			case ParamsWidth:
				p.Width, ok = appendPacked(p.Width, f.b)
			case ParamsJitterOrder:
				p.JitterOrder, ok = appendPacked(p.JitterOrder, f.b)
			case ParamsGray:
				p.Gray, ok = appendPackedBool(p.Gray, f.b)
			case ParamsNumOps:
				p.NumOps, ok = appendPacked(p.NumOps, f.b)
			case ParamsOp:
				p.Op, ok = appendPacked(p.Op, f.b)
			case ParamsErased:
				p.Erased, ok = appendPackedBool(p.Erased, f.b)
			case ParamsEraseTop:
				p.EraseTop, ok = appendPacked(p.EraseTop, f.b)
			case ParamsEraseLeft:
				p.EraseLeft, ok = appendPacked(p.EraseLeft, f.b)
			case ParamsEraseHeight:
				p.EraseHeight, ok = appendPacked(p.EraseHeight, f.b)
			case ParamsEraseWidth:
				p.EraseWidth, ok = appendPacked(p.EraseWidth, f.b)
			case ParamsJitter:
				p.Jitter, ok = appendPackedFloat(p.Jitter, f.b)
			case ParamsSigma:
				p.Sigma, ok = appendPackedFloat(p.Sigma, f.b)
			case ParamsMagnitude:
				p.Magnitude, ok = appendPackedFloat(p.Magnitude, f.b)
			case ParamsEraseNoise:
				p.EraseNoise, ok = appendPackedFixed64(p.EraseNoise, f.b)
			}
		}
		if !ok {
			return malformed("packed field %d of AugmentParams", f.num)
		}
	}
	return nil
}

func appendPackedFloat(s []float32, b []byte) ([]float32, bool) {
	for len(b) > 0 {
		v, n := protowire.ConsumeFixed32(b)
		if n < 0 {
			return s, false
		}
		s = append(s, math.Float32frombits(v))
		b = b[n:]
	}
	return s, true
}

func appendPackedFixed64(s []uint64, b []byte) ([]uint64, bool) {
	for len(b) > 0 {
		v, n := protowire.ConsumeFixed64(b)
		if n < 0 {
			return s, false
		}
		s = append(s, v)
		b = b[n:]
	}
	return s, true
}

func appendPackedBool(s []bool, b []byte) ([]bool, bool) {
	for len(b) > 0 {
		v, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return s, false
		}
		s = append(s, protowire.DecodeBool(v))
		b = b[n:]
	}
	return s, true
}
