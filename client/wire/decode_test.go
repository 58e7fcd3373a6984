package wire

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// split cuts msg into buffers of the given sizes, cycling through them; a
// size of 0 makes an empty buffer on the first pass (and is dropped after
// it, which bounds the buffers). No sizes, or only zeros, is one buffer.
func split(msg []byte, sizes ...int) mem.BufferSlice {
	var out mem.BufferSlice
	var positive []int
	for _, n := range sizes {
		n = min(n, len(msg))
		if n > 0 {
			positive = append(positive, n)
		}
		out = append(out, mem.SliceBuffer(msg[:n]))
		msg = msg[n:]
	}
	if len(positive) == 0 {
		positive = []int{len(msg)}
	}
	for i := 0; len(msg) > 0; i++ {
		n := min(positive[i%len(positive)], len(msg))
		out = append(out, mem.SliceBuffer(msg[:n]))
		msg = msg[n:]
	}
	return out
}

// splits are the ways each test message is cut: whole, gRPC's 16 KiB
// frames, one byte at a time, and odd sizes with empty buffers between.
var splits = [][]int{nil, {16 << 10}, {1}, {3, 0, 7}, {0, 2, 5, 11, 0, 13}}

// reference decodes msg with the generated code, unknown fields discarded
// as the Decoder discards them.
func reference(msg []byte) (*pb.StreamReply, error) {
	var r pb.StreamReply
	err := proto.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(msg, &r)
	return &r, err
}

// asProto is what the Decoder decoded, as the generated type.
func asProto(d *Decoder) *pb.StreamReply {
	switch {
	case d.Header != nil:
		return &pb.StreamReply{Msg: &pb.StreamReply_Header{Header: d.Header}}
	case d.HasBatch:
	default:
		return &pb.StreamReply{}
	}
	b := d.Batch
	out := &pb.Batch{Seq: b.Seq, Epoch: b.Epoch, BatchIndex: b.Index, Indices: b.Indices, Labels: b.Labels,
		Dtype: b.DType, Layout: b.Layout, Shape: b.Shape, FieldData: b.FieldData, FieldEnds: b.FieldEnds,
		FieldPresent: b.FieldPresent, LabelSets: b.LabelSets, LabelSetEnds: b.LabelSetEnds}
	switch {
	case b.HasShm && b.Data != nil:
		panic("both oneof cases set")
	case b.HasShm:
		out.Tensor = &pb.Batch_Shm{Shm: &pb.ShmRef{Slot: b.Shm.Slot, Generation: b.Shm.Generation,
			Offset: b.Shm.Offset, Length: b.Shm.Length}}
	case b.Data != nil:
		out.Tensor = &pb.Batch_Data{Data: b.Data}
	}
	if b.HasParams {
		p := &b.Params
		out.Params = &pb.AugmentParams{Top: p.Top, Left: p.Left, Flip: p.Flip, Height: p.Height, Width: p.Width,
			JitterOrder: p.JitterOrder, Jitter: p.Jitter, Gray: p.Gray, Sigma: p.Sigma, NumOps: p.NumOps, Op: p.Op,
			Magnitude: p.Magnitude, Erased: p.Erased, EraseTop: p.EraseTop, EraseLeft: p.EraseLeft,
			EraseHeight: p.EraseHeight, EraseWidth: p.EraseWidth, EraseNoise: p.EraseNoise}
	}
	if b.HasMix {
		m := &b.Mix
		out.Mix = &pb.MixRecord{Kind: m.Kind, Lam: m.Lam, BoxTop: m.BoxTop, BoxLeft: m.BoxLeft, BoxHeight: m.BoxHeight, BoxWidth: m.BoxWidth}
	}
	return &pb.StreamReply{Msg: &pb.StreamReply_Batch{Batch: out}}
}

// dirty is a Batch full of values a decode must clear.
func dirty() *Batch {
	return &Batch{Seq: 9, Epoch: 9, Index: 9, Indices: []int64{9}, Labels: []int32{9}, DType: 9, Layout: 9,
		Shape: []int64{9}, Data: []byte{9}, Shm: ShmRef{Slot: 9}, HasShm: true,
		Params: Params{Top: []int32{9}, Left: []int32{9}, Flip: []bool{true}, Height: []int32{9}, Width: []int32{9},
			JitterOrder: []uint32{9}, Jitter: []float32{9}, Gray: []bool{true}, Sigma: []float32{9}, NumOps: []uint32{9},
			Op: []uint32{9}, Magnitude: []float32{9}, Erased: []bool{true}, EraseTop: []int32{9}, EraseLeft: []int32{9},
			EraseHeight: []int32{9}, EraseWidth: []int32{9}, EraseNoise: []uint64{9}}, HasParams: true,
		Mix: Mix{Kind: 9, Lam: 9, BoxTop: 9}, HasMix: true,
		FieldData: [][]byte{{9}}, FieldEnds: []uint32{9}, FieldPresent: []bool{true}, LabelSets: []int32{9}, LabelSetEnds: []uint32{9}}
}

func mustMarshal(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

func reply(b *pb.Batch) []byte {
	return mustMarshal(&pb.StreamReply{Msg: &pb.StreamReply_Batch{Batch: b}})
}

func encoded(b *pb.Batch, tensor []byte) []byte {
	bs, err := EncodeBatch(b, mem.SliceBuffer(tensor))
	if err != nil {
		panic(err)
	}
	defer bs.Free()
	return bs.Materialize()
}

// fld appends one field to a hand-built message.
func fld(b []byte, num protowire.Number, typ protowire.Type, v any) []byte {
	b = protowire.AppendTag(b, num, typ)
	switch x := v.(type) {
	case uint64:
		switch typ {
		case protowire.Fixed32Type:
			return protowire.AppendFixed32(b, uint32(x))
		case protowire.Fixed64Type:
			return protowire.AppendFixed64(b, x)
		}
		return protowire.AppendVarint(b, x)
	case int:
		return protowire.AppendVarint(b, uint64(x))
	case []byte:
		return protowire.AppendBytes(b, x)
	case nil:
		return b
	}
	panic(fmt.Sprintf("field: %T", v))
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func packed(vs ...uint64) []byte {
	var b []byte
	for _, v := range vs {
		b = protowire.AppendVarint(b, v)
	}
	return b
}

// validMessages are StreamReply messages proto.Unmarshal accepts: what the
// daemon sends, and what else the encoding allows. Their tensor of 40000
// bytes spans three of gRPC's 16 KiB frames.
func validMessages() map[string][]byte { return messages(40000) }

// messages are validMessages with a tensor of tensorSize bytes.
func messages(tensorSize int) map[string][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	tensor := make([]byte, tensorSize)
	for i := range tensor {
		tensor[i] = byte(rng.Uint32())
	}
	full := &pb.Batch{Seq: 7, Epoch: 2, BatchIndex: 41, Indices: []int64{5, 1 << 40, 0, 3}, Labels: []int32{1, -1, 0, 9},
		Dtype: pb.DType_DTYPE_F32, Layout: pb.Layout_LAYOUT_CHW, Shape: []int64{4, 3, 32, 32},
		Params: &pb.AugmentParams{Top: []int32{0, 4, 2, 1}, Left: []int32{3, 0, 4, 4}, Flip: []bool{true, false, false, true},
			Height: []int32{375, 1, 90, 2000}, Width: []int32{500, 7, 1 << 20, 3},
			JitterOrder: []uint32{0, 1, 2, 3, 3, 2, 1, 0, 1, 0, 3, 2, 2, 3, 0, 1},
			Jitter:      []float32{0.6, 1.4, 1, -0.1, 0, 0, 0, 0, 1.25, 0.75, 2, 0.5, float32(math.Inf(1)), -0, 1e-30, 0.3},
			Gray:        []bool{false, true, true, false}, Sigma: []float32{0.1, 2, 1.5, 0},
			NumOps: []uint32{2, 0, 1, 4}, Op: []uint32{1, 14, 10, 0, 5, 5, 13}, Magnitude: []float32{-0.3, 0, 4, 0, -30, 30, 0},
			Erased: []bool{true, false, true, true}, EraseTop: []int32{1, 0, 7, 0}, EraseLeft: []int32{2, 0, 0, 31},
			EraseHeight: []int32{10, 0, 0, 1}, EraseWidth: []int32{3, 0, 5, 1}, EraseNoise: []uint64{0, 0, 1 << 63, 12345}},
		Mix:       &pb.MixRecord{Kind: pb.MixKind_MIX_KIND_CUTMIX, Lam: 0.71875, BoxTop: 3, BoxLeft: 30, BoxHeight: 9, BoxWidth: 2},
		FieldData: [][]byte{[]byte("a cat.a dogx"), {}}, FieldEnds: []uint32{6, 6, 11, 12, 0, 0, 0, 0},
		FieldPresent: []bool{true, false, true, true, false, false, false, false},
		LabelSets:    []int32{1, 3, -1, 0, 9, 70000}, LabelSetEnds: []uint32{2, 3, 3, 6}}
	inline := proto.CloneOf(full)
	inline.Tensor = &pb.Batch_Data{Data: tensor}
	shm := proto.CloneOf(full)
	shm.Params = nil
	shm.Tensor = &pb.Batch_Shm{Shm: &pb.ShmRef{Slot: 3, Generation: 12, Offset: 3 << 30, Length: 49152}}
	header := &pb.StreamHeader{DatasetSize: 50000, SamplesPerEpoch: 50000, BatchesPerEpoch: 196, BatchSize: 256,
		Dtype: pb.DType_DTYPE_F32, Layout: pb.Layout_LAYOUT_CHW, SampleShape: []int64{3, 32, 32}, SampleBytes: 12288,
		Augment: "crop(32,pad=4),flip,normalize", Transport: pb.Transport_TRANSPORT_SHM, MaxInFlight: 8,
		StartEpoch: 1, StartBatch: 17,
		Shm: &pb.ShmRegion{Path: "/dev/shm/loaderd-1", Size: 1 << 30, SlotSize: 3 << 20, SlotCount: 12, Locked: true}}
	hdr := mustMarshal(&pb.StreamReply{Msg: &pb.StreamReply_Header{Header: header}})
	unpackedBatch := cat(fld(nil, BatchSeq, protowire.VarintType, 3),
		fld(nil, BatchIndices, protowire.VarintType, 10), fld(nil, BatchIndices, protowire.VarintType, 11),
		fld(nil, BatchLabels, protowire.VarintType, uint64(math.MaxUint64)), // -1
		fld(nil, BatchShape, protowire.VarintType, 2), fld(nil, BatchShape, protowire.BytesType, packed(3, 4)),
		fld(nil, BatchFieldEnds, protowire.VarintType, 2), fld(nil, BatchFieldPresent, protowire.VarintType, 1),
		fld(nil, BatchLabelSets, protowire.VarintType, 4), fld(nil, BatchLabelSetEnds, protowire.VarintType, 1),
		fld(nil, BatchParams, protowire.BytesType, cat(
			fld(nil, ParamsTop, protowire.VarintType, 1), fld(nil, ParamsTop, protowire.BytesType, packed(2)),
			fld(nil, ParamsLeft, protowire.VarintType, 5), fld(nil, ParamsFlip, protowire.VarintType, 2),
			fld(nil, ParamsFlip, protowire.BytesType, packed(0, 1)),
			fld(nil, ParamsHeight, protowire.VarintType, 300), fld(nil, ParamsHeight, protowire.BytesType, packed(4, 5)),
			fld(nil, ParamsWidth, protowire.BytesType, packed(6)), fld(nil, ParamsWidth, protowire.VarintType, 400),
			fld(nil, ParamsJitterOrder, protowire.VarintType, 3), fld(nil, ParamsJitterOrder, protowire.BytesType, packed(1, 2)),
			fld(nil, ParamsJitter, protowire.Fixed32Type, uint64(math.Float32bits(0.5))),
			fld(nil, ParamsJitter, protowire.BytesType, protowire.AppendFixed32(protowire.AppendFixed32(nil, math.Float32bits(-1)), 7)),
			fld(nil, ParamsGray, protowire.VarintType, 1), fld(nil, ParamsGray, protowire.BytesType, packed(0, 1)),
			fld(nil, ParamsSigma, protowire.Fixed32Type, uint64(math.Float32bits(1.5))),
			fld(nil, ParamsNumOps, protowire.VarintType, 2), fld(nil, ParamsOp, protowire.BytesType, packed(5, 6)),
			fld(nil, ParamsMagnitude, protowire.BytesType, protowire.AppendFixed32(nil, math.Float32bits(-30))),
			fld(nil, ParamsMagnitude, protowire.Fixed32Type, uint64(math.Float32bits(0.9))),
			fld(nil, ParamsErased, protowire.VarintType, 1), fld(nil, ParamsEraseTop, protowire.BytesType, packed(4)),
			fld(nil, ParamsEraseLeft, protowire.VarintType, 5), fld(nil, ParamsEraseHeight, protowire.VarintType, 6),
			fld(nil, ParamsEraseWidth, protowire.BytesType, packed(7, 8)),
			fld(nil, ParamsEraseNoise, protowire.Fixed64Type, uint64(1)<<60),
			fld(nil, ParamsEraseNoise, protowire.BytesType, protowire.AppendFixed64(nil, 99)))),
		fld(nil, BatchMix, protowire.BytesType, cat(fld(nil, MixKind, protowire.VarintType, 1),
			fld(nil, MixLam, protowire.Fixed64Type, math.Float64bits(0.25)), fld(nil, MixBoxTop, protowire.VarintType, 2))),
		fld(nil, BatchMix, protowire.BytesType, cat(fld(nil, MixLam, protowire.VarintType, 7), // wrong type: skipped
			fld(nil, MixBoxWidth, protowire.VarintType, uint64(math.MaxUint64)))),
		fld(nil, BatchData, protowire.BytesType, []byte("abc")))
	unknown := cat(
		fld(nil, 3, protowire.VarintType, 1), fld(nil, 4, protowire.Fixed32Type, uint64(5)),
		fld(nil, 5, protowire.Fixed64Type, uint64(6)), fld(nil, 6, protowire.BytesType, []byte("skip")),
		fld(nil, protowire.MaxValidNumber, protowire.StartGroupType, nil),
		fld(nil, 1, protowire.VarintType, 1), fld(nil, 2, protowire.StartGroupType, nil),
		fld(nil, math.MaxInt32, protowire.BytesType, []byte("x")), fld(nil, 2, protowire.EndGroupType, nil),
		fld(nil, protowire.MaxValidNumber, protowire.EndGroupType, nil))
	wrongTypes := cat( // known fields with another wire type are unknown fields
		fld(nil, BatchSeq, protowire.BytesType, []byte{1}), fld(nil, BatchEpoch, protowire.Fixed64Type, uint64(1)),
		fld(nil, BatchData, protowire.VarintType, 1), fld(nil, BatchShm, protowire.Fixed32Type, uint64(1)),
		fld(nil, BatchParams, protowire.StartGroupType, nil), fld(nil, BatchParams, protowire.EndGroupType, nil),
		fld(nil, BatchIndices, protowire.Fixed64Type, uint64(1)),
		fld(nil, BatchShm, protowire.BytesType, cat(fld(nil, ShmSlot, protowire.BytesType, []byte{1}),
			fld(nil, ShmOffset, protowire.VarintType, 8), fld(nil, 9, protowire.Fixed32Type, uint64(0)))),
		fld(nil, BatchParams, protowire.BytesType, cat(fld(nil, ParamsTop, protowire.Fixed32Type, uint64(1)),
			fld(nil, 7, protowire.StartGroupType, nil), fld(nil, 7, protowire.EndGroupType, nil))))
	return map[string][]byte{
		"empty reply":         nil,
		"header":              hdr,
		"empty header":        mustMarshal(&pb.StreamReply{Msg: &pb.StreamReply_Header{Header: &pb.StreamHeader{}}}),
		"inline":              reply(inline),
		"shm":                 reply(shm),
		"empty batch":         reply(&pb.Batch{}),
		"empty data":          reply(&pb.Batch{Seq: 1, Tensor: &pb.Batch_Data{Data: []byte{}}}),
		"empty shm":           reply(&pb.Batch{Tensor: &pb.Batch_Shm{Shm: &pb.ShmRef{}}}),
		"empty params":        reply(&pb.Batch{Params: &pb.AugmentParams{}}),
		"encoded":             encoded(full, tensor),
		"encoded empty":       encoded(&pb.Batch{}, nil),
		"encoded seq only":    encoded(&pb.Batch{Seq: 1 << 63}, []byte{1, 2, 3}),
		"negative":            reply(&pb.Batch{Epoch: -1, BatchIndex: math.MinInt64, Indices: []int64{-5}, Labels: []int32{math.MinInt32}, Dtype: -3}),
		"unpacked":            fld(nil, ReplyBatch, protowire.BytesType, unpackedBatch),
		"unknown fields":      cat(unknown, fld(nil, ReplyBatch, protowire.BytesType, cat(unknown, unpackedBatch, unknown)), unknown),
		"wrong wire types":    cat(fld(nil, ReplyHeader, protowire.VarintType, 1), fld(nil, ReplyBatch, protowire.BytesType, wrongTypes)),
		"batch merges":        cat(reply(full), reply(&pb.Batch{Seq: 8, Indices: []int64{6}, Params: &pb.AugmentParams{Top: []int32{7}}})),
		"header merges":       cat(hdr, mustMarshal(&pb.StreamReply{Msg: &pb.StreamReply_Header{Header: &pb.StreamHeader{SampleShape: []int64{1}, Shm: &pb.ShmRegion{Size: 5}}}})),
		"batch then header":   cat(reply(inline), hdr),
		"header then batch":   cat(hdr, reply(shm), reply(&pb.Batch{Seq: 3})),
		"data then shm":       cat(reply(inline), reply(shm)),
		"shm then data":       cat(reply(shm), reply(inline)),
		"shm merges":          cat(reply(shm), reply(&pb.Batch{Tensor: &pb.Batch_Shm{Shm: &pb.ShmRef{Length: 1}}})),
		"data twice":          cat(reply(inline), reply(&pb.Batch{Tensor: &pb.Batch_Data{Data: []byte("second")}})),
		"non-minimal varints": cat(fld(nil, ReplyBatch, protowire.BytesType, []byte{byte(BatchSeq<<3 | 0x80), 0x00, 0x85, 0x80, 0x00})),
		"deep unknown groups": cat(bytes.Repeat(fld(nil, 9, protowire.StartGroupType, nil), protowire.DefaultRecursionLimit+1),
			bytes.Repeat(fld(nil, 9, protowire.EndGroupType, nil), protowire.DefaultRecursionLimit+1)),
	}
}

// decodeAll decodes msg cut as each of splits, checks each result against
// proto.Unmarshal's, and returns the error of the whole-message decode.
func decodeAll(t *testing.T, msg []byte) error {
	t.Helper()
	var first error
	for i, sizes := range splits {
		d := Decoder{Batch: dirty(), Dst: make([]byte, len(msg))}
		err := check(t, &d, msg, sizes)
		if i == 0 {
			first = err
		}
	}
	return first
}

// check decodes msg cut into sizes with d (whose Dst must hold it), and
// holds the result to proto.Unmarshal's: both fail, or both succeed with
// equal messages.
func check(t *testing.T, d *Decoder, msg []byte, sizes []int) error {
	t.Helper()
	want, werr := reference(msg)
	err := d.Decode(split(msg, sizes...))
	switch {
	case werr != nil && err == nil:
		t.Fatalf("split %v: proto.Unmarshal fails (%v), Decode does not:\n%v", sizes, werr, asProto(d))
	case werr == nil && err != nil:
		t.Fatalf("split %v: Decode fails (%v), proto.Unmarshal does not:\n%v", sizes, err, want)
	case err != nil && !errors.Is(err, ErrMalformed):
		t.Fatalf("split %v: %v is not ErrMalformed", sizes, err)
	case err == nil && !proto.Equal(asProto(d), want):
		t.Fatalf("split %v: decoded\n%v\nproto.Unmarshal\n%v", sizes, asProto(d), want)
	case err != nil && (d.Header != nil || d.HasBatch):
		t.Fatalf("split %v: failed decode left Header %v, HasBatch %v", sizes, d.Header, d.HasBatch)
	}
	return err
}

func TestDecodeValid(t *testing.T) {
	for name, msg := range validMessages() {
		t.Run(name, func(t *testing.T) {
			if err := decodeAll(t, msg); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestDecodeMalformed(t *testing.T) {
	batch := func(b ...[]byte) []byte { return fld(nil, ReplyBatch, protowire.BytesType, cat(b...)) }
	long := bytes.Repeat([]byte{0xff}, 9)
	cases := []struct {
		name, want string
		msg        []byte
	}{
		{"truncated tag", "truncated", []byte{0x80}},
		{"truncated tag in batch", "truncated", batch([]byte{0x80})},
		{"tag overflows", "longer than 64 bits", append(append([]byte{}, long...), 0x02)},
		{"tag of 11 bytes", "longer than 64 bits", append(append([]byte{}, long...), 0x80, 0x01)},
		{"varint value overflows", "longer than 64 bits", batch([]byte{byte(BatchSeq << 3)}, long, []byte{0x7f})},
		{"truncated varint value", "truncated", batch([]byte{byte(BatchEpoch << 3), 0x80})},
		{"field 0", "field number 0", []byte{0x00, 0x00}},
		{"field 0 in batch", "field number 0", batch([]byte{0x02, 0x00})},
		{"field over max", "field number", protowire.AppendVarint(nil, uint64(protowire.MaxValidNumber+1)<<3)},
		{"end group outside a group", "outside a group", fld(nil, 5, protowire.EndGroupType, nil)},
		{"end group in batch", "outside a group", batch(fld(nil, 5, protowire.EndGroupType, nil))},
		{"reserved wire type 6", "wire type 6", []byte{1<<3 | 6}},
		{"reserved wire type 7 in batch", "wire type 7", batch([]byte{15<<3 | 7})},
		{"unclosed group", "truncated", fld(nil, 5, protowire.StartGroupType, nil)},
		{"group closed by another", "ended as group", cat(fld(nil, 5, protowire.StartGroupType, nil), fld(nil, 6, protowire.EndGroupType, nil))},
		{"field 0 in group", "field number 0", cat(fld(nil, 5, protowire.StartGroupType, nil), []byte{0x00})},
		{"groups too deep", "too deep", bytes.Repeat(fld(nil, 9, protowire.StartGroupType, nil), protowire.DefaultRecursionLimit+2)},
		{"truncated fixed32", "truncated", []byte{3<<3 | 5, 1, 2, 3}},
		{"truncated fixed64", "truncated", batch([]byte{14<<3 | 1, 1, 2, 3, 4, 5, 6, 7})},
		{"truncated length", "truncated", []byte{3<<3 | 2, 0x80}},
		{"truncated packed length", "truncated", batch([]byte{byte(BatchIndices<<3 | 2), 0x80})},
		{"length past the end", "runs past the end", []byte{3<<3 | 2, 5, 1}},
		{"huge length", "runs past the end", cat([]byte{3<<3 | 2}, protowire.AppendVarint(nil, math.MaxUint64))},
		{"header past the end", "runs past the end", []byte{byte(ReplyHeader<<3 | 2), 5, 1}},
		{"batch past the end", "runs past the end", []byte{byte(ReplyBatch<<3 | 2), 5, 1}},
		{"data past the batch", "runs past the end", cat([]byte{byte(ReplyBatch<<3 | 2), 2, byte(BatchData<<3 | 2), 3}, []byte{1, 2, 3})},
		{"unknown past the batch", "runs past the end", cat([]byte{byte(ReplyBatch<<3 | 2), 2, 14<<3 | 2, 3}, []byte{1, 2, 3})},
		{"fixed past the batch", "past its length", cat([]byte{byte(ReplyBatch<<3 | 2), 2, 14<<3 | 5, 1}, []byte{1, 2, 3})},
		{"length past the batch", "runs past the end", []byte{byte(ReplyBatch<<3 | 2), 2, byte(BatchData<<3 | 2), 0x95, 0x30}},
		{"varint past the batch", "past its length", cat([]byte{byte(ReplyBatch<<3 | 2), 2, byte(BatchSeq << 3), 0x80}, []byte{1})},
		{"group past the batch", "past its length", cat([]byte{byte(ReplyBatch<<3 | 2), 1, 14<<3 | 3}, fld(nil, 14, protowire.EndGroupType, nil))},
		{"bad packed indices", "packed field 4", batch(fld(nil, BatchIndices, protowire.BytesType, []byte{0x80}))},
		{"bad packed labels", "packed field 5", batch(fld(nil, BatchLabels, protowire.BytesType, append(append([]byte{1}, long...), 2)))},
		{"bad packed shape", "packed field 8", batch(fld(nil, BatchShape, protowire.BytesType, []byte{3, 0xff}))},
		{"bad shm tag", "bad tag", batch(fld(nil, BatchShm, protowire.BytesType, []byte{0x80}))},
		{"bad shm value", "field 3", batch(fld(nil, BatchShm, protowire.BytesType, []byte{byte(ShmOffset << 3), 0x80}))},
		{"shm field 0", "field number 0", batch(fld(nil, BatchShm, protowire.BytesType, []byte{0, 0}))},
		{"shm end group", "outside a group", batch(fld(nil, BatchShm, protowire.BytesType, fld(nil, 2, protowire.EndGroupType, nil)))},
		{"shm bad group", "field 5", batch(fld(nil, BatchShm, protowire.BytesType, fld(nil, 5, protowire.StartGroupType, nil)))},
		{"bad params top", "packed field 1", batch(fld(nil, BatchParams, protowire.BytesType, fld(nil, ParamsTop, protowire.BytesType, []byte{0x80})))},
		{"bad params left", "packed field 2", batch(fld(nil, BatchParams, protowire.BytesType, fld(nil, ParamsLeft, protowire.BytesType, []byte{0x80})))},
		{"bad params flip", "packed field 3", batch(fld(nil, BatchParams, protowire.BytesType, fld(nil, ParamsFlip, protowire.BytesType, []byte{1, 0x80})))},
		{"bad params height", "packed field 4", batch(fld(nil, BatchParams, protowire.BytesType, fld(nil, ParamsHeight, protowire.BytesType, []byte{0x80})))},
		{"bad params jitter", "packed field 7", batch(fld(nil, BatchParams, protowire.BytesType, fld(nil, ParamsJitter, protowire.BytesType, []byte{1, 2, 3})))},
		{"bad params op", "packed field 11", batch(fld(nil, BatchParams, protowire.BytesType, fld(nil, ParamsOp, protowire.BytesType, []byte{0x80})))},
		{"bad params erase noise", "packed field 18", batch(fld(nil, BatchParams, protowire.BytesType, fld(nil, ParamsEraseNoise, protowire.BytesType, []byte{1, 2, 3, 4, 5, 6, 7})))},
		{"bad params width", "packed field 5", batch(fld(nil, BatchParams, protowire.BytesType, fld(nil, ParamsWidth, protowire.BytesType, []byte{2, 0xff})))},
		{"params bytes past the end", "field 1", batch(fld(nil, BatchParams, protowire.BytesType, []byte{byte(ParamsTop<<3 | 2), 9}))},
		{"bad header", "stream header", fld(nil, ReplyHeader, protowire.BytesType, []byte{1 << 3, 0x80})},
		{"header with bad utf-8", "stream header", fld(nil, ReplyHeader, protowire.BytesType, fld(nil, 9, protowire.BytesType, []byte{0xff}))},
		{"bad message after a good batch", "truncated", cat(reply(&pb.Batch{Seq: 1}), []byte{0x80})},
		{"bad message after a header", "truncated", cat(mustMarshal(&pb.StreamReply{Msg: &pb.StreamReply_Header{Header: &pb.StreamHeader{BatchSize: 1}}}), []byte{0x80})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := decodeAll(t, tc.msg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Decode: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestDecodeTooLarge(t *testing.T) {
	msg := reply(&pb.Batch{Tensor: &pb.Batch_Data{Data: []byte("12345")}})
	d := Decoder{Batch: &Batch{}, Dst: make([]byte, 4)}
	if err := d.Decode(split(msg)); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "5 bytes, the buffer holds 4") {
		t.Fatalf("Decode: %v, want ErrTooLarge", err)
	}
	d.Dst = make([]byte, 5)
	if err := d.Decode(split(msg, 2)); err != nil || string(d.Batch.Data) != "12345" || cap(d.Batch.Data) != 5 {
		t.Fatalf("Decode: %v, data %q", err, d.Batch.Data)
	}
	// An empty tensor is set (not nil) even without a Dst.
	d = Decoder{Batch: &Batch{}}
	if err := d.Decode(split(reply(&pb.Batch{Tensor: &pb.Batch_Data{}}))); err != nil || d.Batch.Data == nil {
		t.Fatalf("Decode: %v, data %v", err, d.Batch.Data)
	}
}

func TestDecodeNoBatch(t *testing.T) {
	var d Decoder
	if err := d.Decode(split(reply(&pb.Batch{Seq: 1}))); !errors.Is(err, ErrNoBatch) {
		t.Fatalf("Decode: %v, want ErrNoBatch", err)
	}
	hdr := mustMarshal(&pb.StreamReply{Msg: &pb.StreamReply_Header{Header: &pb.StreamHeader{BatchSize: 4}}})
	if err := d.Decode(split(hdr, 1)); err != nil || d.Header.GetBatchSize() != 4 || d.HasBatch {
		t.Fatalf("Decode: %v, header %v, HasBatch %v", err, d.Header, d.HasBatch)
	}
	if err := d.Decode(nil); err != nil || d.Header != nil || d.HasBatch {
		t.Fatalf("Decode(nothing): %v, header %v, HasBatch %v", err, d.Header, d.HasBatch)
	}
}

// TestDecodeReuse decodes a stream's messages with one Decoder and one
// Batch, as the client does: nothing of a message survives into the next.
func TestDecodeReuse(t *testing.T) {
	msgs := validMessages()
	names := []string{"inline", "empty batch", "shm", "unpacked", "header", "encoded", "empty reply", "negative", "inline"}
	d := Decoder{Batch: &Batch{}, Dst: make([]byte, 64<<10)}
	for i, name := range names {
		msg := msgs[name]
		if err := d.Decode(split(msg, splits[i%len(splits)]...)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want, _ := reference(msg)
		if got := asProto(&d); !proto.Equal(got, want) {
			t.Fatalf("%s: decoded\n%v\nwant\n%v", name, got, want)
		}
	}
}

// TestDecodeAllocs holds the point of the Decoder: once its Batch's
// slices have grown, a batch costs no allocation, however gRPC cut it.
func TestDecodeAllocs(t *testing.T) {
	msg := validMessages()["encoded"]
	d := Decoder{Batch: &Batch{}, Dst: make([]byte, len(msg))}
	for _, sizes := range splits {
		bufs := split(msg, sizes...)
		if n := testing.AllocsPerRun(20, func() {
			if err := d.Decode(bufs); err != nil || !d.HasBatch {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("split %v: %.1f allocations per batch", sizes, n)
		}
	}
}

func TestClientCodec(t *testing.T) {
	var c ClientCodec
	if c.Name() != "proto" {
		t.Errorf("Name %q", c.Name())
	}
	req := &pb.StreamRequest{Msg: &pb.StreamRequest_Ack{Ack: &pb.Ack{Seqs: []uint64{1, 2}}}}
	bufs, err := c.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var back pb.StreamRequest
	if err := c.Unmarshal(bufs, &back); err != nil || !proto.Equal(&back, req) {
		t.Fatalf("round trip: %v, %v", err, &back)
	}
	msg := validMessages()["encoded"]
	d := Decoder{Batch: &Batch{}, Dst: make([]byte, len(msg))}
	if err := c.Unmarshal(split(msg, 16<<10), &d); err != nil || !d.HasBatch || d.Batch.Seq != 7 {
		t.Fatalf("Unmarshal into a Decoder: %v, %+v", err, d.Batch)
	}
}

func BenchmarkDecode(b *testing.B) {
	tensor := make([]byte, 3<<20)
	msg := encoded(&pb.Batch{Seq: 1, Indices: make([]int64, 256), Labels: make([]int32, 256), Shape: []int64{256, 3, 32, 32}}, tensor)
	bufs := split(msg, 16<<10)
	d := Decoder{Batch: &Batch{}, Dst: make([]byte, len(tensor))}
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if err := d.Decode(bufs); err != nil {
			b.Fatal(err)
		}
	}
}
