package client

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/loaderd/loaderd/client/sample"
	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// TestValuesMapping holds Values to a byte-by-byte lookup for every dtype,
// layout and channel count, into aligned and misaligned dst, on any host
// (scripts/cross.sh-style: GOARCH=s390x runs it big-endian under qemu).
func TestValuesMapping(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, dt := range []sample.DType{sample.U8, sample.F16, sample.BF16, sample.F32} {
		for _, layout := range []sample.Layout{sample.CHW, sample.HWC} {
			for _, c := range []int{1, 3} {
				table := make([]byte, c*256*dt.Size())
				for i := range table {
					table[i] = byte(r.Uint32())
				}
				n, h, w := 3, 5, 7
				shape := []int64{int64(c), int64(h), int64(w)}
				if layout == sample.HWC {
					shape = []int64{int64(h), int64(w), int64(c)}
				}
				hd := &pb.StreamHeader{Dtype: pb.DType_DTYPE_U8, Layout: pb.Layout(layout), SampleShape: shape,
					ValueTable: table, ValueDtype: pb.DType(dt)}
				if err := checkValues(hd, true); err != nil {
					t.Fatal(err)
				}
				b := &Batch{s: &Stream{header: hd}, DType: sample.U8, Layout: layout, Data: make([]byte, n*h*w*c),
					Shape: []int{n, int(shape[0]), int(shape[1]), int(shape[2])}}
				for i := range b.Data {
					b.Data[i] = byte(r.Uint32())
				}
				var want []byte
				for i, v := range b.Data {
					ch := i % c
					if layout == sample.CHW {
						ch = i / (h * w) % c
					}
					k := (ch*256 + int(v)) * dt.Size()
					want = append(want, table[k:k+dt.Size()]...)
				}
				for _, off := range []int{0, 1} {
					dst := make([]byte, len(want)+1)[off:off]
					got, err := b.Values(dst)
					if err != nil || !bytes.Equal(got, want) || b.ValueDType() != dt {
						t.Fatalf("%v %v %d channels, dst at +%d: %v, or other bytes", dt, layout, c, off, err)
					}
					// Here, with no stream receiving meanwhile, the count is
					// Values' own.
					if n := testing.AllocsPerRun(3, func() { b.Values(got) }); n != 0 {
						t.Fatalf("%v %v %d channels, dst at +%d: Values allocates %v times into a dst large enough", dt, layout, c, off, n)
					}
				}
			}
		}
	}
}

// TestValuesRefuses: a table that does not fit the header, or a batch
// that does not fit the table, is an error, not a wrong tensor.
func TestValuesRefuses(t *testing.T) {
	hd := &pb.StreamHeader{Dtype: pb.DType_DTYPE_U8, Layout: pb.Layout_LAYOUT_CHW, SampleShape: []int64{3, 2, 2},
		ValueTable: make([]byte, 3*256*4), ValueDtype: pb.DType_DTYPE_F32}
	for _, tc := range []struct {
		name  string
		edit  func(h *pb.StreamHeader, b *Batch)
		asked bool
		msg   string
	}{
		{"unasked", func(*pb.StreamHeader, *Batch) {}, false, "did not ask"},
		{"short table", func(h *pb.StreamHeader, _ *Batch) { h.ValueTable = h.ValueTable[:100] }, true, "want 3 channels"},
		{"f32 batches", func(h *pb.StreamHeader, _ *Batch) { h.Dtype = pb.DType_DTYPE_F32 }, true, "want 3 channels"},
		{"batch of other channels", func(_ *pb.StreamHeader, b *Batch) { b.Shape = []int{1, 1, 2, 6} }, true, "not the 3-channel u8 pixels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &pb.StreamHeader{Dtype: hd.Dtype, Layout: hd.Layout, SampleShape: hd.SampleShape, ValueTable: hd.ValueTable, ValueDtype: hd.ValueDtype}
			b := &Batch{s: &Stream{header: h}, DType: sample.U8, Layout: sample.CHW, Data: make([]byte, 12), Shape: []int{1, 3, 2, 2}}
			tc.edit(h, b)
			err := checkValues(h, tc.asked)
			if err == nil && tc.asked {
				_, err = b.Values(nil)
			}
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v, want an error saying %q", err, tc.msg)
			}
		})
	}
}
