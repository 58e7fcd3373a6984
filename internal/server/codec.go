package server

import (
	"sync/atomic"

	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the "proto" codec we delegate to
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/loaderd/loaderd/internal/wire"
	"github.com/loaderd/loaderd/loader"
	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// codec is standard protobuf on the wire, but an inline batch's tensor
// goes out as a reference to its pinned slot instead of being marshalled
// into a copy: gRPC writes it from the slot, then frees the reference,
// which releases the slot back to the loader.
type codec struct{}

var protoCodec = encoding.GetCodecV2("proto")

func (codec) Name() string { return "proto" }

func (codec) Unmarshal(data mem.BufferSlice, v any) error { return protoCodec.Unmarshal(data, v) }

func (codec) Marshal(v any) (mem.BufferSlice, error) {
	ob, ok := v.(*outBatch)
	if !ok {
		return protoCodec.Marshal(v)
	}
	// StreamReply{batch: Batch{<fields>, data: <slot>}}. Field order on
	// the wire is free, so the tensor can come last, as its own buffer.
	inner := proto.Size(ob.batch)
	dataHdr := protowire.SizeTag(9) + protowire.SizeVarint(uint64(len(ob.data)))
	batchLen := inner + dataHdr + len(ob.data)
	n := protowire.SizeTag(2) + protowire.SizeVarint(uint64(batchLen)) + inner + dataHdr
	buf := wire.Pool.Get(n)
	b := protowire.AppendTag((*buf)[:0], 2, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(batchLen))
	b, err := proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(b, ob.batch)
	if err != nil {
		wire.Pool.Put(buf)
		ob.Put(nil) // gRPC never sees the tensor: release it here
		return nil, err
	}
	b = protowire.AppendTag(b, 9, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(len(ob.data)))
	*buf = b
	return mem.BufferSlice{mem.NewBuffer(buf, wire.Pool), mem.NewBuffer(&ob.data, ob)}, nil
}

// outBatch is one inline batch on its way out. As the BufferPool of its
// tensor buffer, it learns when gRPC is done with the slot.
type outBatch struct {
	batch *pb.Batch // everything but the tensor
	data  []byte
	b     *loader.Batch
	sends *atomic.Int64 // the session's count of tensors gRPC holds
}

// Get is never called: the buffer is created around the slot.
func (o *outBatch) Get(int) *[]byte { panic("server: outBatch.Get") }

// Put runs when gRPC has written (or dropped) the tensor.
func (o *outBatch) Put(*[]byte) {
	b, sends := o.b, o.sends
	o.b, o.data, o.sends = nil, nil, nil
	b.Release()
	sends.Add(-1)
}
