package augment

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/loaderd/loaderd/client/sample"
)

func TestParsePhotoOps(t *testing.T) {
	for _, tc := range []struct {
		in    string
		want  []Op
		canon string
	}{
		{"color_jitter=0.4:0.4:0.4:0.1",
			[]Op{ColorJitter{Brightness: [2]float64{0.6, 1.4}, Contrast: [2]float64{0.6, 1.4}, Saturation: [2]float64{0.6, 1.4}, Hue: [2]float64{-0.1, 0.1}}},
			"color_jitter=0.4:0.4:0.4:0.1"},
		{"color_jitter=0.2", []Op{ColorJitter{Brightness: [2]float64{0.8, 1.2}}}, "color_jitter=0.2:0:0:0"},
		{"color_jitter=1.5:0:0.5-1.5:-0.2-0.05",
			[]Op{ColorJitter{Brightness: [2]float64{0, 2.5}, Saturation: [2]float64{0.5, 1.5}, Hue: [2]float64{-0.2, 0.05}}},
			"color_jitter=1.5:0:0.5:-0.2-0.05"},
		{"color_jitter=0.7-0.9:1e-3", []Op{ColorJitter{Brightness: [2]float64{0.7, 0.9}, Contrast: [2]float64{0.999, 1.001}}},
			"color_jitter=0.7-0.9:0.001:0:0"},
		{"grayscale", []Op{Grayscale{Channels: 1}}, "grayscale"},
		{"grayscale=3", []Op{Grayscale{Channels: 3}}, "grayscale=3"},
		{"random_grayscale", []Op{RandomGrayscale{P: 0.1}}, "random_grayscale=0.1"},
		{"random_grayscale=0.25", []Op{RandomGrayscale{P: 0.25}}, "random_grayscale=0.25"},
		{"gaussian_blur=5", []Op{GaussianBlur{Kernel: [2]int{5, 5}, Sigma: DefaultBlurSigma}}, "gaussian_blur=5:0.1-2"},
		{"gaussian_blur=3/7:1.5", []Op{GaussianBlur{Kernel: [2]int{3, 7}, Sigma: [2]float64{1.5, 1.5}}}, "gaussian_blur=3/7:1.5-1.5"},
		{"gaussian_blur=9:0.5-3", []Op{GaussianBlur{Kernel: [2]int{9, 9}, Sigma: [2]float64{0.5, 3}}}, "gaussian_blur=9:0.5-3"},
		{"auto_augment", []Op{AutoAugment{}}, "auto_augment=imagenet"},
		{"AUTO_AUGMENT=CIFAR10", []Op{AutoAugment{Policy: PolicyCIFAR10}}, "auto_augment=cifar10"},
		{"auto_augment=svhn:128", []Op{AutoAugment{Policy: PolicySVHN, Fill: []uint8{128}}}, "auto_augment=svhn:128"},
		{"rand_augment", []Op{RandAugment{N: 2, M: 9, Bins: 31}}, "rand_augment=2:9:31"},
		{"rand_augment=3:5", []Op{RandAugment{N: 3, M: 5, Bins: 31}}, "rand_augment=3:5:31"},
		{"rand_augment=1:10:11:1/2/3", []Op{RandAugment{N: 1, M: 10, Bins: 11, Fill: []uint8{1, 2, 3}}}, "rand_augment=1:10:11:1/2/3"},
		{"trivial_augment_wide", []Op{TrivialAugmentWide{Bins: 31}}, "trivial_augment_wide=31"},
		{"trivial_augment_wide=8:0", []Op{TrivialAugmentWide{Bins: 8, Fill: []uint8{0}}}, "trivial_augment_wide=8:0"},
		{"random_erasing", []Op{RandomErasing{P: 0.5, Scale: DefaultEraseScale, Ratio: DefaultEraseRatio}},
			"random_erasing=0.5:0.02-0.33:0.3-3.3:0"},
		{"random_erasing=0.25:0.1-0.2", []Op{RandomErasing{P: 0.25, Scale: [2]float64{0.1, 0.2}, Ratio: DefaultEraseRatio}},
			"random_erasing=0.25:0.1-0.2:0.3-3.3:0"},
		{"random_erasing=1:0.1-0.2:0.5-2:random", []Op{RandomErasing{P: 1, Scale: [2]float64{0.1, 0.2}, Ratio: [2]float64{0.5, 2}, Random: true}},
			"random_erasing=1:0.1-0.2:0.5-2:random"},
		{"random_erasing=1:0.1-0.2:0.5-2:0.5/-1/2", []Op{RandomErasing{P: 1, Scale: [2]float64{0.1, 0.2}, Ratio: [2]float64{0.5, 2}, Value: []float32{0.5, -1, 2}}},
			"random_erasing=1:0.1-0.2:0.5-2:0.5/-1/2"},
		{"random_resized_crop=224,flip,trivial_augment_wide,normalize=imagenet,random_erasing=0.25",
			[]Op{RandomResizedCrop{Size: 224, Scale: DefaultRRCScale, Ratio: DefaultRRCRatio}, RandomHorizontalFlip{P: 0.5}, TrivialAugmentWide{Bins: 31},
				ToTensor{}, Normalize{ImageNetMean, ImageNetStd}, RandomErasing{P: 0.25, Scale: DefaultEraseScale, Ratio: DefaultEraseRatio}},
			"random_resized_crop=224,flip=0.5,trivial_augment_wide=31,normalize=imagenet,random_erasing=0.25:0.02-0.33:0.3-3.3:0"},
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

// TestPhotoFormatRoundTrip: ops written in Go, in canonical form (what
// Pipeline.Ops returns), come back from their text.
func TestPhotoFormatRoundTrip(t *testing.T) {
	in := Spec{H: 32, W: 32, C: 3, DType: sample.U8, Layout: sample.CHW}
	for _, ops := range [][]Op{
		{ColorJitter{Brightness: [2]float64{1.0 / 3, 1.25}, Hue: [2]float64{-0.5, 0.5}}, Output{DType: sample.F32}},
		{ColorJitter{Contrast: [2]float64{1, 1}, Saturation: [2]float64{0, 0.1}}, Grayscale{Channels: 3}},
		{&RandomCrop{Size: 28}, RandomGrayscale{P: 1.0 / 7}, GaussianBlur{Kernel: [2]int{3, 5}}},
		{AutoAugment{Policy: PolicySVHN, Fill: []uint8{1, 2, 3}}, ToTensor{}, Normalize{CIFAR10Mean, CIFAR10Std}},
		{RandAugment{N: 4, M: 0}, ToTensor{}, RandomErasing{P: 1, Value: []float32{0}}},
		{TrivialAugmentWide{Bins: 2}, Output{DType: sample.BF16}, RandomErasing{P: 0.3, Ratio: [2]float64{1, 1}, Random: true}},
	} {
		p, err := NewPipeline(in, ops...)
		if err != nil {
			t.Fatalf("NewPipeline(%v): %v", FormatOps(ops), err)
		}
		s := p.String()
		got, err := ParseOps(s)
		if err != nil || !reflect.DeepEqual(got, p.Ops()) {
			t.Errorf("ParseOps(%q) = %#v, %v; want %#v", s, got, err, p.Ops())
		}
	}
}

func TestParsePhotoErrors(t *testing.T) {
	for _, s := range []string{
		"color_jitter", "color_jitter=x", "color_jitter=-1", "color_jitter=1:2:3:4:5", "color_jitter=0.1-x",
		"grayscale=2", "grayscale=", "random_grayscale=x", "gaussian_blur", "gaussian_blur=x", "gaussian_blur=3/y",
		"gaussian_blur=3:1:2", "gaussian_blur=3:a-b", "auto_augment=mnist", "auto_augment=imagenet:300",
		"rand_augment=2", "rand_augment=a:9", "rand_augment=2:9:31:0:1", "rand_augment=2:9:x", "trivial_augment_wide=x",
		"trivial_augment_wide=31:1/x", "random_erasing=x", "random_erasing=0.5:0.1", "random_erasing=0.5:0.1-0.2:3",
		"random_erasing=0.5:0.1-0.2:0.3-3:x", "random_erasing=1:2:3:4:5",
	} {
		ops, err := ParseOps(s)
		if !errors.Is(err, ErrSyntax) {
			t.Errorf("ParseOps(%q) = %v, %v; want an ErrSyntax", s, ops, err)
		}
	}
}

// TestPhotoChainErrors: NewPipeline names the op out of place or out of
// range.
func TestPhotoChainErrors(t *testing.T) {
	cifar := Spec{H: 32, W: 32, C: 3, DType: sample.U8, Layout: sample.CHW}
	for _, tc := range []struct {
		ops   string
		index int
		want  string
	}{
		{"normalize=cifar10,color_jitter=0.4", 2, "photometric ops act on uint8"},
		{"out=u8,grayscale", 1, "photometric ops act on uint8"},
		{"color_jitter=0.4,crop=32:4", 1, "crop and flip must come before"},
		{"grayscale,flip", 1, "crop and flip must come before"},
		{"random_erasing,normalize=cifar10", 1, "must come before random_erasing"},
		{"normalize=cifar10,random_erasing,random_erasing", 3, "must end the chain"},
		{"color_jitter=0.4,color_jitter=0.2", 1, "only one of each"},
		{"auto_augment,trivial_augment_wide", 1, "only one of auto_augment"},
		{"rand_augment=5:9", 0, "5 operations"},
		{"rand_augment=2:31", 0, "magnitude 31 outside"},
		{"trivial_augment_wide=1", 0, "1 magnitude bins"},
		{"gaussian_blur=4", 0, "odd"},
		{"gaussian_blur=65", 0, "too large"},
		{"color_jitter=0:0:0:0.6", 0, "hue range"},
		{"auto_augment=cifar10:1/2", 0, "2 fill values"},
		{"out=u8,random_erasing=0.5:0.1-0.2:0.3-3:random", 1, "float output"},
		{"out=u8,random_erasing=0.5:0.1-0.2:0.3-3:0.5", 1, "does not fit the u8"},
		{"normalize=cifar10,random_erasing=0.5:0.1-0.2:0.3-3:1/2", 2, "2 values for 3 channels"},
		{"grayscale,normalize=cifar10", 2, "mean and std need 1 or 1 values"},
	} {
		ops, err := ParseOps(tc.ops)
		if err != nil {
			t.Fatalf("ParseOps(%q): %v", tc.ops, err)
		}
		_, err = NewPipeline(cifar, ops...)
		var oe *OpError
		if !errors.As(err, &oe) || oe.Index != tc.index || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrInvalidOp) {
			t.Errorf("NewPipeline(%q) = %v; want op %d: %q", tc.ops, err, tc.index, tc.want)
		}
	}
}

// photoChains are staged chains over a CIFAR record and over any size.
var photoChains = []struct {
	in  Spec
	ops string
}{
	{cifarSpec, "crop=32:4,flip,color_jitter=0.4:0.4:0.4:0.1,normalize=cifar10,out=f32:chw"},
	{cifarSpec, "crop=32:4:9/8/7,flip,auto_augment=cifar10,normalize=cifar10,random_erasing=0.5:0.02-0.33:0.3-3.3:random"},
	{cifarSpec, "flip,random_grayscale=0.5,gaussian_blur=3:0.1-2,out=u8:hwc,random_erasing=0.7:0.02-0.4:0.3-3.3:7/8/9"},
	{cifarSpec, "crop=28,grayscale,rand_augment=3:9:31:100,out=bf16:hwc,random_erasing=1:0.02-0.33:0.3-3.3:-1"},
	{cifarSpec, "trivial_augment_wide,grayscale=3,normalize=cifar10,out=f16:chw"},
	{cifarSpec, "color_jitter=0.5-1.5:0:1:0.5,rand_augment=4:30,normalize=0.5:0.25,random_erasing=0.9"},
	{Spec{C: 3, DType: sample.U8, Layout: sample.HWC}, "random_resized_crop=40,flip,trivial_augment_wide,color_jitter=0.4:0.4:0.4,normalize=imagenet,random_erasing=0.8"},
	{Spec{H: 50, W: 61, C: 1, DType: sample.U8, Layout: sample.HWC}, "resize=36,center_crop=32,auto_augment=svhn:200,gaussian_blur=5,out=f32:chw,random_erasing=1:0.1-0.3:0.3-3.3:random"},
}

var cifarSpec = Spec{H: 32, W: 32, C: 3, DType: sample.U8, Layout: sample.CHW}

func newChain(t testing.TB, in Spec, s string) *Pipeline {
	t.Helper()
	ops, err := ParseOps(s)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPipeline(in, ops...)
	if err != nil {
		t.Fatalf("NewPipeline(%v, %q): %v", in, s, err)
	}
	return p
}

func noise(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
	return b
}

// TestPhotoApplyMatchesReference holds the staged Apply (and ApplySized
// with a worker's Scratch) to the composition of the pil functions with
// the drawn params, byte for byte.
func TestPhotoApplyMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var sc Scratch
	for _, c := range photoChains {
		p := newChain(t, c.in, c.ops)
		h, w := c.in.H, c.in.W
		if p.Variable() {
			h, w = 45, 57
		}
		fixed := c.in
		fixed.H, fixed.W = h, w
		q := p
		if p.Variable() {
			q = newChain(t, fixed, c.ops) // Reference needs a fixed size
		}
		want := make([]byte, p.Out().Bytes())
		got := make([]byte, p.Out().Bytes())
		got2 := make([]byte, p.Out().Bytes())
		n := 60
		if testing.Short() {
			n = 15
		}
		for i := range n {
			src := noise(r, fixed.Bytes())
			prm := p.DrawSized(5, 1, int64(i), h, w)
			if qp := q.DrawSized(5, 1, int64(i), h, w); qp != prm {
				t.Fatalf("%s: DrawSized differs between sizes of pipeline: %+v, %+v", c.ops, prm, qp)
			}
			if err := q.Reference(want, src, prm); err != nil {
				t.Fatalf("%s: Reference: %v", c.ops, err)
			}
			if err := p.ApplySized(got, src, h, w, prm, &sc); err != nil {
				t.Fatalf("%s: ApplySized: %v", c.ops, err)
			}
			if !p.Variable() {
				if err := p.Apply(got2, src, prm); err != nil {
					t.Fatalf("%s: Apply: %v", c.ops, err)
				}
				if !bytes.Equal(got2, want) {
					t.Fatalf("%s index %d %+v: Apply differs from Reference", c.ops, i, prm)
				}
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s index %d %+v: ApplySized differs from Reference", c.ops, i, prm)
			}
		}
	}
}

// TestPhotoApplyAllocs: Apply allocates nothing once warm, through the
// pool (Apply; not under the race detector, whose pool drops items) or
// the worker's scratch (ApplySized).
func TestPhotoApplyAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, c := range photoChains {
		p := newChain(t, c.in, c.ops)
		h, w := c.in.H, c.in.W
		if p.Variable() {
			h, w = 45, 57
		}
		src := noise(r, h*w*c.in.C)
		dst := make([]byte, p.Out().Bytes())
		var sc Scratch
		var i int64
		allocs := testing.AllocsPerRun(50, func() {
			i++
			prm := p.DrawSized(1, 2, i, h, w)
			if err := p.ApplySized(dst, src, h, w, prm, &sc); err != nil {
				t.Fatal(err)
			}
			if !p.Variable() && !raceEnabled {
				if err := p.Apply(dst, src, prm); err != nil {
					t.Fatal(err)
				}
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per sample", c.ops, allocs)
		}
	}
}

// TestPhotoParamsChecked: Apply refuses params the ops cannot take, with
// ErrParams, instead of panicking in pil.
func TestPhotoParamsChecked(t *testing.T) {
	p := newChain(t, cifarSpec, "color_jitter=0.4:0.4:0.4:0.1,gaussian_blur=3,rand_augment=2:9,normalize=cifar10,random_erasing=1")
	src := make([]byte, cifarSpec.Bytes())
	dst := make([]byte, p.Out().Bytes())
	good := p.Draw(1, 0, 0)
	if err := p.Apply(dst, src, good); err != nil {
		t.Fatal(err)
	}
	for _, f := range []func(*sample.Params){
		func(p *sample.Params) { p.Photo.JitterOrder = [4]uint8{0, 0, 1, 2} },
		func(p *sample.Params) { p.Photo.JitterOrder[0] = 4 },
		func(p *sample.Params) { p.Photo.Jitter[3] = 0.7 },
		func(p *sample.Params) { p.Photo.Jitter[0] = -1 },
		func(p *sample.Params) { p.Photo.Sigma = 0 },
		func(p *sample.Params) { p.Photo.NumOps = 3 },
		func(p *sample.Params) { p.Photo.Ops[0] = sample.PolicyOp{Op: sample.OpPosterize, Magnitude: 9} },
		func(p *sample.Params) { p.Photo.Ops[0] = sample.PolicyOp{Op: sample.OpInvert} },
		func(p *sample.Params) { p.Photo.Ops[1] = sample.PolicyOp{Op: sample.NumAugOps} },
		func(p *sample.Params) {
			p.Erase = sample.Erase{Applied: true, Box: sample.Box{X: 30, Y: 0, W: 3, H: 1}}
		},
		func(p *sample.Params) { p.Top = 1 },
	} {
		prm := good
		prm.Photo.NumOps = 2
		f(&prm)
		if err := p.Apply(dst, src, prm); !errors.Is(err, ErrParams) {
			t.Errorf("Apply(%+v) = %v, want ErrParams", prm, err)
		}
	}
}

// TestPlainChainUnstaged: a chain without photometric ops keeps the single
// fused kernel.
func TestPlainChainUnstaged(t *testing.T) {
	p := newChain(t, cifarSpec, "crop=32:4,flip,normalize=cifar10,out=f32:chw")
	if p.photo != nil {
		t.Fatal("the plain CIFAR chain is staged")
	}
	if p.Photometric() || p.Erases() {
		t.Fatal("the plain CIFAR chain reports photometric ops or erasing")
	}
	p = newChain(t, Spec{C: 3, DType: sample.U8, Layout: sample.HWC}, "random_resized_crop=32,flip,normalize=imagenet")
	if p.sized.inner.photo != nil {
		t.Fatal("the plain ImageNet chain is staged")
	}
	for _, tc := range []struct {
		ops          string
		photo, erase bool
	}{
		{"random_resized_crop=32,grayscale=3,normalize=imagenet", true, false},
		{"random_resized_crop=32,normalize=imagenet,random_erasing", false, true},
		{"random_resized_crop=32,trivial_augment_wide,normalize=imagenet,random_erasing", true, true},
	} {
		p = newChain(t, Spec{C: 3, DType: sample.U8, Layout: sample.HWC}, tc.ops)
		if p.Photometric() != tc.photo || p.Erases() != tc.erase {
			t.Errorf("%s: Photometric %v, Erases %v", tc.ops, p.Photometric(), p.Erases())
		}
	}
}

// TestPhotoPixelPipeline: photometric ops stay on the pixel side of
// values_on_client, byte for byte; random_erasing cannot be split.
func TestPhotoPixelPipeline(t *testing.T) {
	p := newChain(t, cifarSpec, "crop=32:4,flip,trivial_augment_wide,color_jitter=0.3,normalize=cifar10,out=f32:hwc")
	q, err := p.PixelPipeline()
	if err != nil {
		t.Fatal(err)
	}
	table, dt := p.ValueTable()
	if dt != sample.F32 {
		t.Fatalf("table of %v", dt)
	}
	r := rand.New(rand.NewPCG(7, 8))
	pix := make([]byte, q.Out().Bytes())
	full := make([]byte, p.Out().Bytes())
	for i := range 20 {
		src := noise(r, cifarSpec.Bytes())
		prm := p.Draw(3, 0, int64(i))
		if qp := q.Draw(3, 0, int64(i)); qp != prm {
			t.Fatalf("pixel stage draws %+v, pipeline %+v", qp, prm)
		}
		if err := p.Apply(full, src, prm); err != nil {
			t.Fatal(err)
		}
		if err := q.Apply(pix, src, prm); err != nil {
			t.Fatal(err)
		}
		for k, v := range pix {
			c := k % 3
			if e := table[(c*256+int(v))*4 : (c*256+int(v))*4+4]; !bytes.Equal(e, full[4*k:4*k+4]) {
				t.Fatalf("index %d element %d: table gives %v, pipeline %v", i, k, e, full[4*k:4*k+4])
			}
		}
	}
	p = newChain(t, cifarSpec, "crop=32:4,normalize=cifar10,random_erasing")
	if _, err := p.PixelPipeline(); !errors.Is(err, ErrInvalidOp) || !strings.Contains(err.Error(), "random_erasing") {
		t.Errorf("PixelPipeline with random_erasing: %v", err)
	}
}

// TestNewPipelineAsErasing: the Output a stream asks for goes before
// random_erasing, which keeps ending the chain.
func TestNewPipelineAsErasing(t *testing.T) {
	ops, _ := ParseOps("crop=32:4,color_jitter=0.4,normalize=cifar10,out=f32:chw,random_erasing")
	p, err := NewPipelineAs(cifarSpec, ops, Output{DType: sample.BF16, Layout: sample.HWC}, false)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.String(), "crop=32:4,color_jitter=0.4:0:0:0,normalize=cifar10,out=bf16:hwc,random_erasing=0.5:0.02-0.33:0.3-3.3:0"; got != want {
		t.Errorf("NewPipelineAs = %s, want %s", got, want)
	}
}
