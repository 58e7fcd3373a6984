package augment

import (
	"errors"
	"strings"
	"testing"

	"github.com/loaderd/loaderd/client/sample"
)

// TestNewPipelineAs: the requested dtype and layout against chains with and
// without out=, written by the asker (strict) or a default.
func TestNewPipelineAs(t *testing.T) {
	hwc := Spec{H: 32, W: 32, C: 3, DType: sample.U8, Layout: sample.HWC}
	anySize := Spec{C: 3, DType: sample.U8, Layout: sample.HWC}
	const cifar = "crop=32:4,flip=0.5,normalize=cifar10,out=f32:chw"
	tests := []struct {
		name   string
		in     Spec
		chain  string
		dtype  sample.DType
		layout sample.Layout
		strict bool
		want   string // the pipeline's ops, or the error's text
		out    Spec
	}{
		{"no request keeps the chain", cifarCHW, cifar, 0, 0, true, cifar,
			Spec{32, 32, 3, sample.F32, sample.CHW}},
		{"no request, no out=", hwc, "flip=0.5", 0, 0, true, "flip=0.5", hwc},
		{"no out=, dtype", hwc, "crop=32:4,flip=0.5", sample.F16, 0, true, "crop=32:4,flip=0.5,out=f16:hwc",
			Spec{32, 32, 3, sample.F16, sample.HWC}},
		{"no out=, layout", hwc, "flip=0.5", 0, sample.CHW, true, "flip=0.5,out=u8:chw",
			Spec{32, 32, 3, sample.U8, sample.CHW}},
		{"empty chain, both", cifarCHW, "", sample.BF16, sample.HWC, true, "out=bf16:hwc",
			Spec{32, 32, 3, sample.BF16, sample.HWC}},
		{"out=, agreeing request", cifarCHW, cifar, sample.F32, sample.CHW, true, cifar,
			Spec{32, 32, 3, sample.F32, sample.CHW}},
		{"out=, other dtype", cifarCHW, cifar, sample.F16, 0, true, "dtype f16 disagrees with the augment spec's f32", Spec{}},
		{"out=, other layout", cifarCHW, cifar, 0, sample.HWC, true, "layout hwc disagrees with the augment spec's chw", Spec{}},
		{"out= without a layout, other layout", hwc, "out=f32", sample.F32, sample.CHW, true,
			"layout chw disagrees with the augment spec's hwc", Spec{}},
		{"dtype checked before layout", cifarCHW, cifar, sample.F16, sample.HWC, true, "dtype f16 disagrees", Spec{}},
		{"default out= yields", cifarCHW, cifar, sample.F16, sample.HWC, false,
			"crop=32:4,flip=0.5,normalize=cifar10,out=f16:hwc", Spec{32, 32, 3, sample.F16, sample.HWC}},
		{"default out= yields to layout", cifarCHW, cifar, 0, sample.HWC, false,
			"crop=32:4,flip=0.5,normalize=cifar10,out=f32:hwc", Spec{32, 32, 3, sample.F32, sample.HWC}},
		{"u8 drops a default's normalisation", cifarCHW, cifar, sample.U8, 0, false,
			"crop=32:4,flip=0.5,out=u8:chw", Spec{32, 32, 3, sample.U8, sample.CHW}},
		{"u8 drops totensor and normalize without out=", hwc, "totensor,normalize=cifar10,flip=0.5", sample.U8, 0, true,
			"flip=0.5,out=u8:chw", Spec{32, 32, 3, sample.U8, sample.CHW}},
		{"u8 against an asker's float out=", cifarCHW, cifar, sample.U8, 0, true, "dtype u8 disagrees with the augment spec's f32", Spec{}},
		{"u8 on a u8 chain keeps its ops", hwc, "crop=32:4,out=u8:chw", sample.U8, 0, false, "crop=32:4,out=u8:chw",
			Spec{32, 32, 3, sample.U8, sample.CHW}},
		{"float request keeps normalize", hwc, "normalize=cifar10", sample.F16, 0, true, "normalize=cifar10,out=f16:chw",
			Spec{32, 32, 3, sample.F16, sample.CHW}},
		{"a default's out= ops all go", hwc, "out=f32,flip=0.5,out=chw", sample.F32, 0, false, "flip=0.5,out=f32:chw",
			Spec{32, 32, 3, sample.F32, sample.CHW}},
		{"any size, u8 default", anySize, "random_resized_crop=224,flip=0.5,normalize=imagenet,out=f32:chw", sample.U8, 0, false,
			"random_resized_crop=224,flip=0.5,out=u8:chw", Spec{224, 224, 3, sample.U8, sample.CHW}},
		{"unknown dtype", cifarCHW, cifar, 9, 0, false, "unknown dtype 9", Spec{}},
		{"unknown layout", cifarCHW, cifar, 0, 7, false, "unknown layout 7", Spec{}},
		{"the chain's error first", hwc, "crop=64:0", 9, 0, false, "op 0 (crop=64:0): size 64 exceeds", Spec{}},
		{"the chain's error without a request", hwc, "crop=64:0", 0, 0, false, "op 0 (crop=64:0): size 64 exceeds", Spec{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ops, err := ParseOps(tt.chain)
			if err != nil {
				t.Fatal(err)
			}
			p, err := NewPipelineAs(tt.in, ops, Output{DType: tt.dtype, Layout: tt.layout}, tt.strict)
			if tt.out == (Spec{}) {
				if err == nil || !errors.Is(err, ErrInvalidOp) || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("got %v, %v; want an ErrInvalidOp saying %q", p, err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := FormatOps(p.Ops()); got != tt.want || p.Out() != tt.out || p.In() != tt.in {
				t.Fatalf("got %q, %v → %v; want %q, %v → %v", got, p.In(), p.Out(), tt.want, tt.in, tt.out)
			}
		})
	}
}
