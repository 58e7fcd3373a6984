package server

import (
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the "proto" codec we delegate to
	"google.golang.org/grpc/mem"

	"github.com/loaderd/loaderd/client/wire"
	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// codec is standard protobuf on the wire, but an inline batch's tensor
// goes out as a reference to its pinned slot instead of being marshalled
// into a copy (wire.EncodeBatch): gRPC writes it from the slot, then frees
// the reference, which releases the slot.
type codec struct{}

var protoCodec = encoding.GetCodecV2("proto")

func (codec) Name() string { return "proto" }

func (codec) Unmarshal(data mem.BufferSlice, v any) error { return protoCodec.Unmarshal(data, v) }

func (codec) Marshal(v any) (mem.BufferSlice, error) {
	ob, ok := v.(*outBatch)
	if !ok {
		return protoCodec.Marshal(v)
	}
	out, err := wire.EncodeBatch(ob.msg, ob.tensor)
	if err != nil {
		ob.tensor.Free() // gRPC never saw the tensor
	}
	return out, err
}

// outBatch is one inline batch on its way out: the message without its
// tensor, and the tensor as a buffer gRPC frees when written.
type outBatch struct {
	msg    *pb.Batch
	tensor mem.Buffer
}
