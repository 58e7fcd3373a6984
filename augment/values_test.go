package augment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/loaderd/loaderd/client/sample"
)

var valueSpecs = []struct {
	name  string
	in    Spec
	chain string
}{
	{"cifar default", cifarCHW, "crop=32:4,flip=0.5,normalize=cifar10,out=f32:chw"},
	{"cifar f16 hwc", cifarCHW, "crop=32:4,flip=0.5,normalize=cifar10,out=f16:hwc"},
	{"cifar bf16 fill", cifarCHW, "crop=32:4:128/64/255,flip=0.5,normalize=cifar10,out=bf16:chw"},
	{"one fill, hwc in", Spec{32, 32, 3, sample.U8, sample.HWC}, "flip=0.5,crop=28:6:200,totensor,out=f32:hwc"},
	{"flip after normalize", Spec{32, 32, 3, sample.U8, sample.HWC}, "crop=28:2,normalize=imagenet,flip=0.3,out=f16:hwc"},
	{"float out alone", cifarCHW, "flip,out=f32:chw"},
	{"normalize, no out", Spec{24, 20, 3, sample.U8, sample.HWC}, "normalize=cifar10"},
	{"u8 out", cifarCHW, "crop=32:4,flip=0.5,out=u8:hwc"},
	{"grey", Spec{28, 28, 1, sample.U8, sample.CHW}, "crop=28:2,normalize=0.1307:0.3081,out=bf16"},
	{"imagenet", Spec{C: 3, DType: sample.U8, Layout: sample.HWC}, "random_resized_crop=224,flip=0.5,normalize=imagenet,out=f32:chw"},
	{"resize center_crop", Spec{C: 3, DType: sample.U8, Layout: sample.HWC}, "resize=40,center_crop=32,normalize=imagenet,out=bf16:hwc"},
	{"center_crop pads", Spec{C: 3, DType: sample.U8, Layout: sample.HWC}, "center_crop=48,flip,normalize=cifar10,out=f16:chw"},
	{"resize then crop fill", Spec{C: 3, DType: sample.U8, Layout: sample.HWC}, "resize=36,center_crop=32,crop=32:4:255,flip=0.5,normalize=cifar10,out=f32:hwc"},
	{"fixed-size resampling", Spec{50, 70, 3, sample.U8, sample.HWC}, "random_resized_crop=32:0.3-1,normalize=imagenet,out=f16:hwc"},
}

// TestPixelPipeline: the pixel stage's output mapped through the value
// table is the full pipeline's, byte for byte, with the same draws, for
// many samples, epochs and seeds.
func TestPixelPipeline(t *testing.T) {
	for _, tc := range valueSpecs {
		t.Run(tc.name, func(t *testing.T) {
			ops, err := ParseOps(tc.chain)
			if err != nil {
				t.Fatal(err)
			}
			p, err := NewPipeline(tc.in, ops...)
			if err != nil {
				t.Fatal(err)
			}
			q, err := p.PixelPipeline()
			if err != nil {
				t.Fatal(err)
			}
			want := p.Out()
			want.DType = sample.U8
			if q.Out() != want || q.In() != p.In() {
				t.Fatalf("pixel stage %v → %v, want %v → %v", q.In(), q.Out(), p.In(), want)
			}
			table, dt := p.ValueTable()
			if dt != p.Out().DType || len(table) != p.Out().C*256*dt.Size() {
				t.Fatalf("table of %d bytes of %v for %v", len(table), dt, p.Out())
			}
			full, pix := make([]byte, p.Out().Bytes()), make([]byte, q.Out().Bytes())
			var s1, s2 Scratch
			r := rand.New(rand.NewPCG(1, 2))
			n := 40
			if p.Out().H > 100 {
				n = 6
			}
			for _, seed := range []uint64{0, 7, 1 << 40} {
				for epoch := range int64(3) {
					for idx := range int64(n) {
						h, w := tc.in.H, tc.in.W
						if p.Variable() {
							h, w = 16+r.IntN(80), 16+r.IntN(80)
						}
						src := make([]byte, h*w*tc.in.C)
						for i := range src {
							src[i] = byte(r.Uint32())
						}
						prm := p.DrawSized(seed, epoch, idx, h, w)
						if got := q.DrawSized(seed, epoch, idx, h, w); got != prm {
							t.Fatalf("draw %d/%d/%d: pixel stage %+v, full %+v", seed, epoch, idx, got, prm)
						}
						if a, b := p.Scale(h, w, prm), q.Scale(h, w, prm); a != b {
							t.Fatalf("scale %d, pixel stage's %d", a, b)
						}
						if err := p.ApplySized(full, src, h, w, prm, &s1); err != nil {
							t.Fatal(err)
						}
						if err := q.ApplySized(pix, src, h, w, prm, &s2); err != nil {
							t.Fatal(err)
						}
						if got := mapValues(pix, table, dt.Size(), q.Out()); !bytes.Equal(got, full) {
							t.Fatalf("seed %d epoch %d index %d %dx%d: mapped pixels differ from the full output", seed, epoch, idx, h, w)
						}
					}
				}
			}
		})
	}
}

// mapValues is what a client does: each byte through its channel's table.
func mapValues(px, table []byte, size int, s Spec) []byte {
	out := make([]byte, 0, len(px)*size)
	for i, v := range px {
		c := i % s.C
		if s.Layout == sample.CHW {
			c = i / (s.H * s.W)
		}
		k := (c*256 + int(v)) * size
		out = append(out, table[k:k+size]...)
	}
	return out
}

// TestValueTable: every element is what value() computes, in the output
// dtype's little-endian bits.
func TestValueTable(t *testing.T) {
	for _, tc := range valueSpecs {
		t.Run(tc.name, func(t *testing.T) {
			ops, _ := ParseOps(tc.chain)
			p, err := NewPipeline(tc.in, ops...)
			if err != nil {
				t.Fatal(err)
			}
			var vals []Op
			for _, op := range p.Ops() {
				switch op.(type) {
				case ToTensor, Normalize, Output:
					vals = append(vals, op)
				}
			}
			table, dt := p.ValueTable()
			for c := range p.Out().C {
				for v := range 256 {
					x := value(vals, c, uint8(v))
					var want []byte
					switch dt {
					case sample.U8:
						want = []byte{uint8(v)}
					case sample.F16:
						want = binary.LittleEndian.AppendUint16(nil, sample.Float16(x))
					case sample.BF16:
						want = binary.LittleEndian.AppendUint16(nil, sample.BFloat16(x))
					case sample.F32:
						want = binary.LittleEndian.AppendUint32(nil, math.Float32bits(x))
					}
					k := (c*256 + v) * dt.Size()
					if got := table[k : k+dt.Size()]; !bytes.Equal(got, want) {
						t.Fatalf("channel %d byte %d: % x, want % x (%v)", c, v, got, want, x)
					}
				}
			}
		})
	}
}

// TestPixelOpsRefuses: a chain that moves or mixes pixels after a value op
// cannot be split. NewPipeline refuses these chains too, so pixelOps is
// tested on its own.
func TestPixelOpsRefuses(t *testing.T) {
	norm := Normalize{Mean: CIFAR10Mean, Std: CIFAR10Std}
	for _, tc := range []struct {
		name string
		ops  []Op
		at   int
		msg  string
	}{
		{"crop after normalize", []Op{ToTensor{}, norm, RandomCrop{Size: 4}}, 2, "follows totensor"},
		{"resize after a float out", []Op{Output{DType: sample.F16}, Resize{Size: 8}}, 1, "follows out=f16"},
		{"center_crop after normalize", []Op{RandomHorizontalFlip{P: 1}, norm, CenterCrop{Size: 8}}, 2, "follows normalize=cifar10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := pixelOps(tc.ops)
			var oe *OpError
			if !errors.Is(err, ErrInvalidOp) || !errors.As(err, &oe) || oe.Index != tc.at || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v, want an OpError at %d saying %q", err, tc.at, tc.msg)
			}
		})
	}
	// A u8 out= and a flip after the value ops are fine.
	kept, err := pixelOps([]Op{RandomCrop{Size: 4}, Output{DType: sample.U8}, ToTensor{}, RandomHorizontalFlip{P: 1}, Output{Layout: sample.HWC}})
	if err != nil || FormatOps(kept) != "crop=4:0,flip=1" {
		t.Fatalf("got %q, %v", FormatOps(kept), err)
	}
}
