package wire

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// TestFieldNumbers holds the constants to the generated descriptors, both
// ways: each constant names the field it claims, and each field of the
// messages the codecs handle has a constant.
func TestFieldNumbers(t *testing.T) {
	want := map[proto.Message]map[string]protowire.Number{
		&pb.StreamReply{}: {"header": ReplyHeader, "batch": ReplyBatch},
		&pb.Batch{}: {"seq": BatchSeq, "epoch": BatchEpoch, "batch_index": BatchIndex, "indices": BatchIndices,
			"labels": BatchLabels, "dtype": BatchDType, "layout": BatchLayout, "shape": BatchShape,
			"data": BatchData, "shm": BatchShm, "params": BatchParams, "mix": BatchMix,
			"field_data": BatchFieldData, "field_ends": BatchFieldEnds, "field_present": BatchFieldPresent,
			"label_sets": BatchLabelSets, "label_set_ends": BatchLabelSetEnds},
		&pb.MixRecord{}: {"kind": MixKind, "lam": MixLam, "box_top": MixBoxTop, "box_left": MixBoxLeft,
			"box_height": MixBoxHeight, "box_width": MixBoxWidth},
		&pb.ShmRef{}: {"slot": ShmSlot, "generation": ShmGeneration, "offset": ShmOffset, "length": ShmLength},
		&pb.AugmentParams{}: {"top": ParamsTop, "left": ParamsLeft, "flip": ParamsFlip, "height": ParamsHeight, "width": ParamsWidth,
			"jitter_order": ParamsJitterOrder, "jitter": ParamsJitter, "gray": ParamsGray, "sigma": ParamsSigma,
			"num_ops": ParamsNumOps, "op": ParamsOp, "magnitude": ParamsMagnitude, "erased": ParamsErased,
			"erase_top": ParamsEraseTop, "erase_left": ParamsEraseLeft, "erase_height": ParamsEraseHeight,
			"erase_width": ParamsEraseWidth, "erase_noise": ParamsEraseNoise},
	}
	for msg, fields := range want {
		md := msg.ProtoReflect().Descriptor()
		if got := md.Fields().Len(); got != len(fields) {
			t.Errorf("%s has %d fields, client/wire knows %d: add the new ones to fields.go and both codecs", md.FullName(), got, len(fields))
		}
		for name, num := range fields {
			fd := md.Fields().ByName(protoreflect.Name(name))
			if fd == nil {
				t.Errorf("%s has no field %q", md.FullName(), name)
				continue
			}
			if fd.Number() != num {
				t.Errorf("%s.%s is field %d on the wire, client/wire says %d", md.FullName(), name, fd.Number(), num)
			}
		}
	}
}
