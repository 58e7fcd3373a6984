package augment

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/loaderd/loaderd/client/sample"
)

func TestParseOps(t *testing.T) {
	for _, tc := range []struct {
		in    string
		want  []Op
		canon string // FormatOps of the result
	}{
		{"", nil, ""},
		{"crop=32:4,flip=0.5,normalize=cifar10,out=f32:chw", CIFARTrain(sample.F32, sample.CHW), "crop=32:4,flip=0.5,normalize=cifar10,out=f32:chw"},
		{"crop=32:4,flip=0.5,out=u8:hwc", CIFARTrain(sample.U8, sample.HWC), "crop=32:4,flip=0.5,out=u8:hwc"},
		{" Crop = 32:4 , FLIP , ToTensor, normalize=CIFAR10, out=BF16:NHWC ",
			[]Op{RandomCrop{Size: 32, Padding: 4}, RandomHorizontalFlip{P: 0.5}, ToTensor{}, Normalize{CIFAR10Mean, CIFAR10Std}, Output{sample.BF16, sample.HWC}},
			"crop=32:4,flip=0.5,normalize=cifar10,out=bf16:hwc"},
		{"crop=24", []Op{RandomCrop{Size: 24}}, "crop=24:0"},
		{"crop=24:2:128", []Op{RandomCrop{Size: 24, Padding: 2, Fill: []uint8{128}}}, "crop=24:2:128"},
		{"crop=24:2:1/2/255", []Op{RandomCrop{Size: 24, Padding: 2, Fill: []uint8{1, 2, 255}}}, "crop=24:2:1/2/255"},
		{"flip=1", []Op{RandomHorizontalFlip{P: 1}}, "flip=1"},
		{"totensor", []Op{ToTensor{}}, "totensor"},
		{"out=f16,normalize=imagenet", []Op{Output{DType: sample.F16}, Normalize{ImageNetMean, ImageNetStd}}, "out=f16,normalize=imagenet"},
		{"normalize=0.5:0.25", []Op{ToTensor{}, Normalize{[]float32{0.5}, []float32{0.25}}}, "normalize=0.5:0.25"},
		{"totensor,normalize=0.1/0.2/0.3:1/2/3", []Op{ToTensor{}, Normalize{[]float32{0.1, 0.2, 0.3}, []float32{1, 2, 3}}}, "normalize=0.1/0.2/0.3:1/2/3"},
		{"out=chw", []Op{Output{Layout: sample.CHW}}, "out=chw"},
		{"out=hwc:f32", []Op{Output{DType: sample.F32, Layout: sample.HWC}}, "out=f32:hwc"},
		{"out=u8,normalize=cifar10", []Op{Output{DType: sample.U8}, ToTensor{}, Normalize{CIFAR10Mean, CIFAR10Std}}, "out=u8,normalize=cifar10"},
	} {
		got, err := ParseOps(tc.in)
		if err != nil {
			t.Errorf("ParseOps(%q): %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseOps(%q) = %#v, want %#v", tc.in, got, tc.want)
		}
		if s := FormatOps(got); s != tc.canon {
			t.Errorf("FormatOps(ParseOps(%q)) = %q, want %q", tc.in, s, tc.canon)
		}
		if again, err := ParseOps(tc.canon); err != nil || !reflect.DeepEqual(again, got) {
			t.Errorf("ParseOps(%q) = %#v, %v; want %#v", tc.canon, again, err, got)
		}
	}
}

// TestFormatRoundTrip: ParseOps(FormatOps(ops)) == ops for chains written
// in Go, including a ToTensor that must stay explicit.
func TestFormatRoundTrip(t *testing.T) {
	for _, ops := range [][]Op{
		CIFARTrain(sample.F32, sample.CHW), CIFARTrain(sample.F16, sample.HWC), CIFARTrain(sample.BF16, sample.CHW), CIFARTrain(sample.U8, sample.CHW),
		{ToTensor{}},
		{ToTensor{}, Output{Layout: sample.HWC}, Normalize{[]float32{0.1}, []float32{3}}},
		{RandomHorizontalFlip{P: 0.25}, RandomCrop{Size: 7, Padding: 3, Fill: []uint8{0, 1, 2}}, Output{DType: sample.F32}, Normalize{[]float32{1.0 / 3}, []float32{1e-7}}},
		{Output{DType: sample.F32}, Output{DType: sample.U8}, ToTensor{}, Normalize{CIFAR10Mean, CIFAR10Std}},
	} {
		s := FormatOps(ops)
		got, err := ParseOps(s)
		if err != nil || !reflect.DeepEqual(got, ops) {
			t.Errorf("ParseOps(%q) = %#v, %v; want %#v", s, got, err, ops)
		}
	}
}

func TestParseOpsErrors(t *testing.T) {
	for _, s := range []string{
		"crop", "crop=", "crop=a", "crop=32:b", "crop=32:4:300", "crop=32:4:1/x", "crop=1:2:3:4",
		"flip=", "flip=half", "totensor=1", "normalize", "normalize=foo", "normalize=1/x:1", "normalize=1:y",
		"out=f64", "out=f32:f16", "out=chw:hwc", "out=f32:chw:u8", "bogus", ",", "crop=32:4,,flip",
	} {
		ops, err := ParseOps(s)
		if !errors.Is(err, ErrSyntax) || !strings.HasPrefix(err.Error(), "augment: parse ") {
			t.Errorf("ParseOps(%q) = %v, %v; want an ErrSyntax", s, ops, err)
		}
	}
}
