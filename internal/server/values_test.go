package server

import (
	"bytes"
	"context"
	"io"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// pixelSource is n h×w RGB images whose every byte differs from its
// neighbours, so crops, flips and tables all show.
type pixelSource struct{ n, h, w int64 }

func (s pixelSource) Len() int64 { return s.n }
func (s pixelSource) Spec() augment.Spec {
	return augment.Spec{H: int(s.h), W: int(s.w), C: 3, DType: sample.U8, Layout: sample.HWC}
}
func (s pixelSource) Classes() []string { return []string{"a"} }
func (s pixelSource) String() string    { return "pixels:" }
func (s pixelSource) Close() error      { return nil }
func (s pixelSource) Sample(i int64, scratch []byte) (int32, []byte, error) {
	for k := range scratch {
		scratch[k] = byte(int64(k)*7 + i*31 + int64(k*k)>>5)
	}
	return 0, scratch, nil
}

// TestValuesOnClient: a values_on_client stream sends U8 batches and a
// table in its header which, applied by channel, give the batches of the
// same stream without the flag, byte for byte.
func TestValuesOnClient(t *testing.T) {
	ds := &Dataset{Name: "px", Spec: "pixels:", Source: pixelSource{n: 50, h: 20, w: 20},
		Augment: "crop=16:4:9/99/199,flip=0.5,normalize=cifar10,out=f32:chw"}
	_, api, _ := serve(t, Options{}, ds)
	for _, tc := range []struct {
		name    string
		augment string
		dtype   pb.DType
		layout  pb.Layout
	}{
		{"default", "", 0, 0},
		{"default as f16 hwc", "", pb.DType_DTYPE_F16, pb.Layout_LAYOUT_HWC},
		{"bf16 hwc", "crop=16:2,flip=0.5,normalize=imagenet,out=bf16:hwc", 0, 0},
		{"resized crop", "random_resized_crop=12,flip=0.5,normalize=imagenet,out=f32:chw", 0, 0},
		{"u8", "flip,out=u8:hwc", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &pb.Open{Dataset: "px", BatchSize: 7, Seed: 11, Epochs: 2, Augment: tc.augment, Dtype: tc.dtype, Layout: tc.layout}
			h0, plain := rawBatches(t, api, o)
			o.ValuesOnClient = true
			h, got := rawBatches(t, api, o)
			vd := sample.DType(h.GetValueDtype())
			if h.GetDtype() != pb.DType_DTYPE_U8 || h.GetValueDtype() != h0.GetDtype() || h.GetLayout() != h0.GetLayout() ||
				h.GetAugment() != h0.GetAugment() || h.GetSampleBytes()*int64(vd.Size()) != h0.GetSampleBytes() ||
				len(h.GetValueTable()) != 3*256*vd.Size() || len(h0.GetValueTable()) != 0 || h0.GetValueDtype() != 0 {
				t.Fatalf("header %v\nwithout the flag %v", h, h0)
			}
			if len(got) != len(plain) || len(got) != 16 {
				t.Fatalf("%d batches, %d without the flag", len(got), len(plain))
			}
			for i, b := range got {
				w := plain[i]
				if b.GetDtype() != pb.DType_DTYPE_U8 || !slices.Equal(b.GetIndices(), w.GetIndices()) ||
					!bytes.Equal(mapTable(b, h.GetValueTable(), vd.Size()), w.GetData()) {
					t.Fatalf("batch %d: %v %v, mapped through the table, differs from %v", i, b.GetDtype(), b.GetIndices(), w.GetIndices())
				}
			}
		})
	}
}

// mapTable applies a header's value table to a U8 batch, as a client does.
func mapTable(b *pb.Batch, table []byte, size int) []byte {
	sh := b.GetShape() // N, then C H W or H W C
	plane := int(sh[2] * sh[3])
	out := make([]byte, 0, len(b.GetData())*size)
	for i, v := range b.GetData() {
		c := i % int(sh[3])
		if b.GetLayout() == pb.Layout_LAYOUT_CHW {
			c = i / plane % int(sh[1])
		}
		k := (c*256 + int(v)) * size
		out = append(out, table[k:k+size]...)
	}
	return out
}

// TestValuesOnClientSizing: the batch limit and memory follow the U8
// samples sent, not the f32 the client makes of them.
func TestValuesOnClientSizing(t *testing.T) {
	ds := &Dataset{Name: "big", Spec: "pixels:", Source: pixelSource{n: 10, h: 224, w: 224}, Augment: "normalize=imagenet,out=f32:chw"}
	srv, _, _ := serve(t, Options{}, ds)
	o := &pb.Open{Dataset: "big", BatchSize: 512}
	if _, err := srv.validate(o); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "inline limit") {
		t.Fatalf("f32 batch of 512: %v, want over the inline limit", err)
	}
	o.ValuesOnClient = true
	p, err := srv.validate(o)
	if err != nil {
		t.Fatal(err)
	}
	if p.pipe.Out().Bytes() != 224*224*3 || p.full.Out().Bytes() != 4*224*224*3 {
		t.Fatalf("sample of %d bytes sent, %d made", p.pipe.Out().Bytes(), p.full.Out().Bytes())
	}
}

// rawBatches reads a whole inline stream: its header and batches.
func rawBatches(t *testing.T, api pb.LoaderClient, o *pb.Open) (*pb.StreamHeader, []*pb.Batch) {
	t.Helper()
	st, err := api.Stream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(open(o)); err != nil {
		t.Fatal(err)
	}
	var h *pb.StreamHeader
	var all []*pb.Batch
	for {
		r, err := st.Recv()
		if err == io.EOF {
			return h, all
		}
		if err != nil {
			t.Fatal(err)
		}
		if h == nil {
			h = r.GetHeader()
			continue
		}
		all = append(all, r.GetBatch())
		if err := ack(st, r.GetBatch().GetSeq()); err != nil {
			t.Fatal(err)
		}
	}
}
