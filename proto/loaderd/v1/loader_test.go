package loaderdv1_test

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// cifarBatch builds an inline batch of n f32 CHW 32×32×3 images with
// per-sample params: 512 of them are exactly 6 MiB of tensor.
func cifarBatch(n int) *pb.Batch {
	const sample = 3 * 32 * 32 * 4
	data := make([]byte, n*sample)
	for i := range data {
		data[i] = byte(i*7 + i>>12)
	}
	b := &pb.Batch{
		Seq: 41, Epoch: 3, BatchIndex: 17,
		Dtype: pb.DType_DTYPE_F32, Layout: pb.Layout_LAYOUT_CHW,
		Shape:  []int64{int64(n), 3, 32, 32},
		Tensor: &pb.Batch_Data{Data: data},
		Params: &pb.AugmentParams{},
	}
	for i := range n {
		b.Indices = append(b.Indices, int64(49999-i*97%50000))
		b.Labels = append(b.Labels, int32(i%10))
		b.Params.Top = append(b.Params.Top, int32(i%9))
		b.Params.Left = append(b.Params.Left, int32(i*5%9))
		b.Params.Flip = append(b.Params.Flip, i%3 == 0)
	}
	return b
}

func TestBatchRoundTrip(t *testing.T) {
	const n = 512
	want := cifarBatch(n)
	if got := len(want.GetData()); got != 6<<20 {
		t.Fatalf("fixture tensor is %d bytes, want 6 MiB", got)
	}
	wire, err := proto.Marshal(&pb.StreamReply{Msg: &pb.StreamReply_Batch{Batch: want}})
	if err != nil {
		t.Fatal(err)
	}
	// Packed metadata for 512 samples is a few KiB; unpacked repeated fields
	// would add a tag byte per element (2.5 KiB more).
	if over := len(wire) - len(want.GetData()); over > 6<<10 {
		t.Errorf("encoding overhead %d bytes over the tensor, want <= 6 KiB", over)
	}
	var reply pb.StreamReply
	if err := proto.Unmarshal(wire, &reply); err != nil {
		t.Fatal(err)
	}
	got := reply.GetBatch()
	if got == nil || reply.GetHeader() != nil {
		t.Fatalf("reply holds %T, want a Batch", reply.GetMsg())
	}
	if !proto.Equal(got, want) {
		t.Fatal("batch changed in the round trip")
	}
	if !bytes.Equal(got.GetData(), want.GetData()) || got.GetShm() != nil {
		t.Fatal("tensor bytes changed in the round trip")
	}
	if len(got.GetIndices()) != n || len(got.GetParams().GetFlip()) != n {
		t.Fatalf("got %d indices, %d flips, want %d", len(got.GetIndices()), len(got.GetParams().GetFlip()), n)
	}
}

// TestPacked checks on the wire that every repeated scalar field of a batch
// travels as one packed record, not one record per element.
func TestPacked(t *testing.T) {
	b := cifarBatch(4)
	b.Tensor = &pb.Batch_Shm{Shm: &pb.ShmRef{Slot: 2, Generation: 9, Offset: 2 << 20, Length: 4 * 12288}}
	tests := []struct {
		name   string
		msg    proto.Message
		fields []protowire.Number
	}{
		{"Batch", b, []protowire.Number{4, 5, 8}},
		{"AugmentParams", b.GetParams(), []protowire.Number{1, 2, 3}},
		{"Ack", &pb.Ack{Seqs: []uint64{1, 2, 300}}, []protowire.Number{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wire, err := proto.Marshal(tt.msg)
			if err != nil {
				t.Fatal(err)
			}
			seen := map[protowire.Number][]protowire.Type{}
			for len(wire) > 0 {
				num, typ, n := protowire.ConsumeTag(wire)
				if n < 0 {
					t.Fatal(protowire.ParseError(n))
				}
				m := protowire.ConsumeFieldValue(num, typ, wire[n:])
				if m < 0 {
					t.Fatal(protowire.ParseError(m))
				}
				seen[num] = append(seen[num], typ)
				wire = wire[n+m:]
			}
			for _, f := range tt.fields {
				if got := seen[f]; len(got) != 1 || got[0] != protowire.BytesType {
					t.Errorf("field %d encoded as %v, want one packed (bytes) record", f, got)
				}
			}
		})
	}
}

// TestBatchTagsFit checks the promise in loader.proto that Batch's hot
// fields keep one-byte tags: all but those only a multi-label dataset's
// batches carry.
func TestBatchTagsFit(t *testing.T) {
	cold := map[string]bool{"label_sets": true, "label_set_ends": true}
	fields := (&pb.Batch{}).ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		if f := fields.Get(i); f.Number() >= 16 && !cold[string(f.Name())] {
			t.Errorf("Batch.%s has number %d; keep Batch fields below 16", f.Name(), f.Number())
		}
	}
}

func TestServiceMethods(t *testing.T) {
	tests := []struct {
		name, full         string
		clientSt, serverSt bool
		input, output      protoreflect.FullName
	}{
		{"ListDatasets", pb.Loader_ListDatasets_FullMethodName, false, false,
			"loaderd.v1.ListDatasetsRequest", "loaderd.v1.ListDatasetsResponse"},
		{"Stream", pb.Loader_Stream_FullMethodName, true, true,
			"loaderd.v1.StreamRequest", "loaderd.v1.StreamReply"},
		{"SampleNames", pb.Loader_SampleNames_FullMethodName, false, false,
			"loaderd.v1.SampleNamesRequest", "loaderd.v1.SampleNamesResponse"},
		{"GetSamples", pb.Loader_GetSamples_FullMethodName, false, false,
			"loaderd.v1.GetSamplesRequest", "loaderd.v1.GetSamplesResponse"},
	}
	svc := pb.File_loaderd_v1_loader_proto.Services().ByName("Loader")
	if svc == nil || svc.FullName() != "loaderd.v1.Loader" || pb.Loader_ServiceDesc.ServiceName != "loaderd.v1.Loader" {
		t.Fatal("service loaderd.v1.Loader not found")
	}
	if got, want := svc.Methods().Len(), len(tests); got != want {
		t.Errorf("service has %d methods, want %d", got, want)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := svc.Methods().ByName(protoreflect.Name(tt.name))
			if m == nil {
				t.Fatal("method missing")
			}
			if got := "/" + string(svc.FullName()) + "/" + tt.name; got != tt.full {
				t.Errorf("full method name %q, want %q", tt.full, got)
			}
			if m.IsStreamingClient() != tt.clientSt || m.IsStreamingServer() != tt.serverSt {
				t.Errorf("streaming client=%v server=%v, want %v %v",
					m.IsStreamingClient(), m.IsStreamingServer(), tt.clientSt, tt.serverSt)
			}
			if m.Input().FullName() != tt.input || m.Output().FullName() != tt.output {
				t.Errorf("%s -> %s, want %s -> %s", m.Input().FullName(), m.Output().FullName(), tt.input, tt.output)
			}
		})
	}
}
