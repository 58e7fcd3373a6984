package wire

import (
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// EncodeBatch marshals StreamReply{batch: b} with tensor as the batch's
// inline data, without copying it: the tensor goes last (field order on
// the wire is free) as the returned slice's final buffer, so gRPC writes
// it straight from where it lies and frees it when done. b's own tensor
// field must be unset. On error the tensor is not referenced: the caller
// still owns it.
func EncodeBatch(b *pb.Batch, tensor mem.Buffer) (mem.BufferSlice, error) {
	size := tensor.Len()
	inner := proto.Size(b)
	dataHdr := protowire.SizeTag(BatchData) + protowire.SizeVarint(uint64(size))
	batchLen := inner + dataHdr + size
	n := protowire.SizeTag(ReplyBatch) + protowire.SizeVarint(uint64(batchLen)) + inner + dataHdr
	buf := Pool.Get(n)
	out := protowire.AppendTag((*buf)[:0], ReplyBatch, protowire.BytesType)
	out = protowire.AppendVarint(out, uint64(batchLen))
	out, err := proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(out, b)
	if err != nil {
		Pool.Put(buf)
		return nil, err
	}
	out = protowire.AppendTag(out, BatchData, protowire.BytesType)
	out = protowire.AppendVarint(out, uint64(size))
	*buf = out
	return mem.BufferSlice{mem.NewBuffer(buf, Pool), tensor}, nil
}
