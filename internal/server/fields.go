package server

import (
	"github.com/loaderd/loaderd/client/wire"
	"github.com/loaderd/loaderd/loader"
	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// fieldsMessage adds b's extra fields and label sets to msg, laid out as
// loader.proto's Batch says: per field one bytes value of its samples back
// to back, with ends and presence flags f-major. They travel in the
// message on every transport (a shared-memory batch too): they are small
// beside the tensor, and bounded by the dataset's maxfieldbytes=.
func fieldsMessage(msg *pb.Batch, b *loader.Batch) {
	n, nf := b.Len(), b.NumFields()
	if nf > 0 {
		msg.FieldData = make([][]byte, nf)
		msg.FieldEnds, msg.FieldPresent = make([]uint32, 0, nf*n), make([]bool, 0, nf*n)
		for f := range nf {
			size := 0
			for k := range n {
				size += len(b.Field(f, k))
			}
			data := make([]byte, 0, size)
			for k := range n {
				data = append(data, b.Field(f, k)...)
				msg.FieldEnds = append(msg.FieldEnds, uint32(len(data)))
				msg.FieldPresent = append(msg.FieldPresent, b.Present(f, k))
			}
			msg.FieldData[f] = data
		}
	}
	if b.MultiLabel() {
		msg.LabelSetEnds = make([]uint32, n)
		for k := range n {
			msg.LabelSets = append(msg.LabelSets, b.LabelSet(k)...)
			msg.LabelSetEnds[k] = uint32(len(msg.LabelSets))
		}
	}
}

// headerFields names the source's extra fields and says whether it is
// multi-label, in the stream header.
func headerFields(h *pb.StreamHeader, src loader.Source) {
	h.FieldNames = loader.FieldNamesOf(src)
	h.MultiLabel = loader.MultiLabelOf(src)
}

// The clients accept messages sized for the loader's bound on a batch's
// fields: a compile-time check that the two constants agree.
var _ [loader.MaxBatchFieldBytes - wire.MaxBatchFieldBytes]struct{}
var _ [wire.MaxBatchFieldBytes - loader.MaxBatchFieldBytes]struct{}
