package augment

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/loaderd/loaderd/client/sample"
)

var cifarCHW = Spec{H: 32, W: 32, C: 3, DType: sample.U8, Layout: sample.CHW}

func TestOutSpec(t *testing.T) {
	for _, tc := range []struct {
		in   Spec
		ops  []Op
		want Spec
	}{
		{cifarCHW, nil, cifarCHW},
		{cifarCHW, CIFARTrain(sample.F32, sample.CHW), Spec{32, 32, 3, sample.F32, sample.CHW}},
		{cifarCHW, CIFARTrain(sample.BF16, sample.HWC), Spec{32, 32, 3, sample.BF16, sample.HWC}},
		{cifarCHW, CIFARTrain(sample.U8, sample.HWC), Spec{32, 32, 3, sample.U8, sample.HWC}},
		{Spec{40, 30, 1, sample.U8, sample.HWC}, []Op{RandomCrop{Size: 24}}, Spec{24, 24, 1, sample.U8, sample.HWC}},
		{Spec{40, 30, 3, sample.U8, sample.HWC}, []Op{RandomCrop{Size: 36, Padding: 3}, ToTensor{}}, Spec{36, 36, 3, sample.F32, sample.CHW}},
		{Spec{4, 4, 3, sample.U8, sample.HWC}, []Op{Output{DType: sample.F16}}, Spec{4, 4, 3, sample.F16, sample.HWC}},
		{Spec{4, 4, 3, sample.U8, sample.HWC}, []Op{ToTensor{}, Output{Layout: sample.HWC}}, Spec{4, 4, 3, sample.F32, sample.HWC}},
		{Spec{4, 4, 3, sample.U8, sample.CHW}, []Op{&RandomCrop{Size: 2}, &RandomHorizontalFlip{P: 1}, &ToTensor{}, &Normalize{Mean: []float32{0}, Std: []float32{1}}, &Output{DType: sample.BF16}},
			Spec{2, 2, 3, sample.BF16, sample.CHW}},
	} {
		p, err := NewPipeline(tc.in, tc.ops...)
		if err != nil {
			t.Errorf("%v %s: %v", tc.in, FormatOps(tc.ops), err)
			continue
		}
		if p.Out() != tc.want || p.In() != tc.in {
			t.Errorf("%v %s: in %v out %v, want out %v", tc.in, FormatOps(tc.ops), p.In(), p.Out(), tc.want)
		}
	}
}

func TestNewPipelineErrors(t *testing.T) {
	norm := Normalize{Mean: CIFAR10Mean, Std: CIFAR10Std}
	type custom struct{ Output }
	for _, tc := range []struct {
		name string
		in   Spec
		ops  []Op
		kind error
		at   int    // index of the bad op, for ErrInvalidOp
		msg  string // part of the message
	}{
		{"f32 input", Spec{4, 4, 3, sample.F32, sample.HWC}, nil, ErrInvalidSpec, 0, "must be u8"},
		{"two channels", Spec{4, 4, 2, sample.U8, sample.HWC}, nil, ErrInvalidSpec, 0, "2 channels"},
		{"empty", Spec{0, 4, 3, sample.U8, sample.HWC}, nil, ErrInvalidSpec, 0, "size 0x4"},
		{"no layout", Spec{4, 4, 3, sample.U8, 0}, nil, ErrInvalidSpec, 0, "layout"},
		{"crop too big", cifarCHW, []Op{RandomCrop{Size: 41, Padding: 4}}, ErrInvalidOp, 0, "exceeds the padded image 40x40"},
		{"crop size 0", cifarCHW, []Op{RandomCrop{Size: 0}}, ErrInvalidOp, 0, "size 0"},
		{"negative padding", cifarCHW, []Op{RandomCrop{Size: 8, Padding: -1}}, ErrInvalidOp, 0, "padding -1"},
		{"huge padding", cifarCHW, []Op{RandomCrop{Size: 8, Padding: 1 << 40}}, ErrInvalidOp, 0, "padding 1099511627776"},
		{"huge image", Spec{1 << 21, 1, 1, sample.U8, sample.HWC}, nil, ErrInvalidSpec, 0, "larger than"},
		{"fill count", cifarCHW, []Op{RandomCrop{Size: 8, Fill: []uint8{1, 2}}}, ErrInvalidOp, 0, "2 fill values"},
		{"crop after totensor", cifarCHW, []Op{ToTensor{}, RandomCrop{Size: 8}}, ErrInvalidOp, 1, "before totensor"},
		{"two crops", cifarCHW, []Op{RandomCrop{Size: 30}, RandomCrop{Size: 20}}, ErrInvalidOp, 1, "one crop"},
		{"two flips", cifarCHW, []Op{RandomHorizontalFlip{P: 0.5}, RandomHorizontalFlip{P: 0.5}}, ErrInvalidOp, 1, "one flip"},
		{"flip p", cifarCHW, []Op{RandomHorizontalFlip{P: 1.5}}, ErrInvalidOp, 0, "outside [0, 1]"},
		{"flip NaN", cifarCHW, []Op{RandomHorizontalFlip{P: math.NaN()}}, ErrInvalidOp, 0, "outside [0, 1]"},
		{"totensor twice", cifarCHW, []Op{ToTensor{}, ToTensor{}}, ErrInvalidOp, 1, "already f32"},
		{"normalize on u8", cifarCHW, []Op{norm}, ErrInvalidOp, 0, "add totensor"},
		{"normalize then u8", cifarCHW, []Op{ToTensor{}, norm, Output{DType: sample.U8}}, ErrInvalidOp, 2, "raw pixels"},
		{"normalize length", cifarCHW, []Op{ToTensor{}, Normalize{Mean: []float32{0, 0}, Std: []float32{1}}}, ErrInvalidOp, 1, "1 or 3 values"},
		{"std zero", cifarCHW, []Op{ToTensor{}, Normalize{Mean: []float32{0}, Std: []float32{0}}}, ErrInvalidOp, 1, "non-zero"},
		{"mean inf", cifarCHW, []Op{ToTensor{}, Normalize{Mean: []float32{float32(math.Inf(1))}, Std: []float32{1}}}, ErrInvalidOp, 1, "not finite"},
		{"bad dtype", cifarCHW, []Op{Output{DType: 9}}, ErrInvalidOp, 0, "unknown dtype"},
		{"bad layout", cifarCHW, []Op{Output{Layout: 7}}, ErrInvalidOp, 0, "unknown layout"},
		{"nil op", cifarCHW, []Op{nil}, ErrInvalidOp, 0, "nil op"},
		{"nil pointer", cifarCHW, []Op{(*ToTensor)(nil)}, ErrInvalidOp, 0, "nil op"},
		{"foreign op", cifarCHW, []Op{custom{}}, ErrInvalidOp, 0, "cannot be fused"},
	} {
		_, err := NewPipeline(tc.in, tc.ops...)
		if !errors.Is(err, tc.kind) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.kind)
			continue
		}
		if !strings.HasPrefix(err.Error(), "augment: ") || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: message %q lacks %q", tc.name, err, tc.msg)
		}
		var oe *OpError
		if tc.kind == ErrInvalidOp && (!errors.As(err, &oe) || oe.Index != tc.at) {
			t.Errorf("%s: err %v, want an *OpError at op %d", tc.name, err, tc.at)
		}
	}
}

func TestApplyErrors(t *testing.T) {
	p := cifarPipeline(t)
	src, dst := make([]byte, p.In().Bytes()), make([]byte, p.Out().Bytes())
	noFlip, err := NewPipeline(cifarCHW, RandomCrop{Size: 32, Padding: 4}, ToTensor{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		p        *Pipeline
		dst, src []byte
		prm      sample.Params
		kind     error
	}{
		{"short dst", p, dst[:len(dst)-1], src, sample.Params{}, ErrBufferSize},
		{"nil dst", p, nil, src, sample.Params{}, ErrBufferSize},
		{"short src", p, dst, src[:len(src)-1], sample.Params{}, ErrBufferSize},
		{"long src", p, dst, append(src[:len(src):len(src)], 0), sample.Params{}, ErrBufferSize},
		{"top too big", p, dst, src, sample.Params{Top: 9}, ErrParams},
		{"left too big", p, dst, src, sample.Params{Left: 9}, ErrParams},
		{"negative top", p, dst, src, sample.Params{Top: -1}, ErrParams},
		{"flip without flip op", noFlip, dst, src, sample.Params{Flip: true}, ErrParams},
	} {
		for name, f := range map[string]func([]byte, []byte, sample.Params) error{"Apply": tc.p.Apply, "Reference": tc.p.Reference} {
			err := f(tc.dst, tc.src, tc.prm)
			if !errors.Is(err, tc.kind) || !strings.HasPrefix(err.Error(), "augment: ") {
				t.Errorf("%s %s: err = %v, want %v", name, tc.name, err, tc.kind)
			}
		}
	}
	// The edges of the range are fine.
	if err := p.Apply(dst, src, sample.Params{Top: 8, Left: 8, Flip: true}); err != nil {
		t.Errorf("Apply at the far corner: %v", err)
	}
}

// TestOpsCopied: a pipeline keeps its own copies of slices in ops, so a
// caller reusing them cannot change it.
func TestOpsCopied(t *testing.T) {
	mean, std, fill := []float32{0.5}, []float32{0.5}, []uint8{7}
	in := Spec{H: 1, W: 1, C: 1, DType: sample.U8, Layout: sample.HWC}
	p, err := NewPipeline(in, RandomCrop{Size: 2, Padding: 1, Fill: fill}, ToTensor{}, Normalize{Mean: mean, Std: std})
	if err != nil {
		t.Fatal(err)
	}
	before := p.String()
	mean[0], std[0], fill[0] = 9, 9, 9
	if p.String() != before {
		t.Errorf("ops changed with the caller's slices: %s, was %s", p, before)
	}
	if got := FormatOps(p.Ops()); got != before {
		t.Errorf("Ops() = %s, want %s", got, before)
	}
}
