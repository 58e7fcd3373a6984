package augment

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/loaderd/loaderd/client/sample"
)

func TestResizedSize(t *testing.T) {
	for _, c := range []struct{ h, w, s, wantH, wantW int }{
		{375, 500, 256, 256, 341}, // int(256·500/375) = int(341.33)
		{500, 375, 256, 341, 256},
		{256, 256, 224, 224, 224},
		{100, 301, 3, 3, 9}, // int(9.03)
		{7, 3, 2, 4, 2},     // int(4.67): truncation, not rounding
	} {
		h, w := resizedSize(c.h, c.w, c.s)
		if h != c.wantH || w != c.wantW {
			t.Errorf("resizedSize(%d, %d, %d) = %dx%d, want %dx%d", c.h, c.w, c.s, h, w, c.wantH, c.wantW)
		}
	}
}

func TestCenterOffset(t *testing.T) {
	for _, c := range []struct{ n, crop, want int }{
		{256, 224, 16},
		{225, 224, 0}, // round(0.5) = 0: Python rounds half to even
		{227, 224, 2}, // round(1.5) = 2
		{224, 224, 0},
		{100, 224, -62}, // padded by (224-100)//2 on the left
		{101, 224, -61},
	} {
		if got := centerOffset(c.n, c.crop); got != c.want {
			t.Errorf("centerOffset(%d, %d) = %d, want %d", c.n, c.crop, got, c.want)
		}
	}
}

func TestFallbackBox(t *testing.T) {
	r := DefaultRRCRatio
	// Explicit cases, computed by hand from get_params' fallback.
	check := func(h, w int, want sample.Box) {
		t.Helper()
		if got := fallbackBox(h, w, r); got != want {
			t.Errorf("fallbackBox(%d, %d) = %+v, want %+v", h, w, got, want)
		}
	}
	check(10, 1000, sample.Box{X: 493, Y: 0, W: 13, H: 10}) // too wide: round(10·4/3) = 13
	check(1000, 10, sample.Box{X: 0, Y: 493, W: 10, H: 13}) // too tall: round(10/0.75) = 13
	check(300, 400, sample.Box{W: 400, H: 300})             // in range: whole image
	check(300, 401, sample.Box{X: 0, Y: 0, W: 400, H: 300}) // round(300·4/3) = 400, (401-400)//2 = 0
	check(400, 299, sample.Box{X: 0, Y: 0, W: 299, H: 399}) // round(299/0.75) = round(398.67) = 399
	check(2, 5, sample.Box{X: 1, Y: 0, W: 3, H: 2})         // round(2.67) = 3
	check(5, 2, sample.Box{X: 0, Y: 1, W: 2, H: 3})         // round(2.67) = 3
}

func rrcStage(t *testing.T, size int, scale, ratio [2]float64) *geoStage {
	t.Helper()
	p, err := NewPipeline(Spec{C: 3, DType: sample.U8, Layout: sample.HWC},
		RandomResizedCrop{Size: size, Scale: scale, Ratio: ratio})
	if err != nil {
		t.Fatal(err)
	}
	return &p.sized.geo
}

// TestRRCDistribution checks the sampling rule's properties: every box
// lies inside the image; a box that came from a try has its area fraction
// and aspect ratio within the ranges (up to the rounding of its sides);
// corners spread over the valid positions; and an image no try can fit
// takes the central fallback.
func TestRRCDistribution(t *testing.T) {
	g := rrcStage(t, 224, [2]float64{}, [2]float64{})
	const h, w, n = 375, 500, 20000
	var fallbacks int
	var sumScale float64
	cornerX := map[int32]bool{}
	for i := range int64(n) {
		b := g.draw(drawKey(7, 0, i), h, w)
		if b.X < 0 || b.Y < 0 || b.W <= 0 || b.H <= 0 || int(b.X+b.W) > w || int(b.Y+b.H) > h {
			t.Fatalf("box %+v outside %dx%d", b, w, h)
		}
		if b == fallbackBox(h, w, g.ratio) {
			fallbacks++
			continue
		}
		// Rounding each side by up to half a pixel moves the area
		// fraction and ratio by a little; allow for it.
		bw, bh := float64(b.W), float64(b.H)
		lo := (bw - 0.5) * (bh - 0.5) / (h * w)
		hi := (bw + 0.5) * (bh + 0.5) / (h * w)
		if hi < 0.08 || lo > 1 {
			t.Fatalf("box %+v: area fraction %v..%v outside [0.08, 1]", b, lo, hi)
		}
		if (bw+0.5)/(bh-0.5) < 3.0/4 || (bw-0.5)/(bh+0.5) > 4.0/3 {
			t.Fatalf("box %+v: ratio %v outside [3/4, 4/3]", b, bw/bh)
		}
		sumScale += bw * bh / (h * w)
		cornerX[b.X] = true
	}
	// The rule's own mean, simulated with an independent generator: the
	// fit test rejects large areas at extreme ratios, so it is below the
	// 0.54 of the uniform draw.
	if m, want := sumScale/float64(n-fallbacks), simulateRRCMean(h, w, 400000); math.Abs(m-want) > 0.01 {
		t.Errorf("mean area fraction %v, torchvision's rule gives %v", m, want)
	}
	if fallbacks > n/100 {
		t.Errorf("%d fallbacks of %d on a 4:3 image", fallbacks, n)
	}
	if len(cornerX) < 300 {
		t.Errorf("only %d distinct corner columns", len(cornerX))
	}
	// A 100:1 strip fits no box of ratio ≤ 4/3 and area ≥ 8%: every draw
	// is the fallback.
	for i := range int64(100) {
		if b := g.draw(drawKey(7, 0, i), 10, 1000); b != (sample.Box{X: 493, W: 13, H: 10}) {
			t.Fatalf("strip: box %+v, want the fallback", b)
		}
	}
	// Scale fixed at 1 and ratio at 1 on a square: the whole image.
	g1 := rrcStage(t, 8, [2]float64{1, 1}, [2]float64{1, 1})
	if b := g1.draw(drawKey(1, 2, 3), 50, 50); b != (sample.Box{W: 50, H: 50}) {
		t.Errorf("scale 1 ratio 1: box %+v, want the whole image", b)
	}
}

// simulateRRCMean is get_params written plainly over math/rand: the mean
// area fraction of the boxes that came from a try.
func simulateRRCMean(h, w, n int) float64 {
	r := rand.New(rand.NewPCG(3, 4))
	lo, hi := math.Log(3.0/4), math.Log(4.0/3)
	var sum float64
	var k int
	for range n {
		for range 10 {
			target := float64(h*w) * (0.08 + 0.92*r.Float64())
			ar := math.Exp(lo + (hi-lo)*r.Float64())
			bw := int(math.RoundToEven(math.Sqrt(target * ar)))
			bh := int(math.RoundToEven(math.Sqrt(target / ar)))
			if bw > 0 && bw <= w && bh > 0 && bh <= h {
				sum += float64(bw*bh) / float64(h*w)
				k++
				break
			}
		}
	}
	return sum / float64(k)
}

func TestDrawSizedDeterministic(t *testing.T) {
	ops, err := ParseOps("random_resized_crop=224,flip=0.5,normalize=imagenet,out=f32:chw")
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPipeline(Spec{C: 3, DType: sample.U8, Layout: sample.HWC}, ops...)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Variable() || p.Out() != (Spec{H: 224, W: 224, C: 3, DType: sample.F32, Layout: sample.CHW}) {
		t.Fatalf("variable %v, out %v", p.Variable(), p.Out())
	}
	seen := map[sample.Box]bool{}
	flips := 0
	for i := range int64(200) {
		a := p.DrawSized(42, 3, i, 375, 500)
		if b := p.DrawSized(42, 3, i, 375, 500); a != b {
			t.Fatalf("index %d: %+v then %+v", i, a, b)
		}
		seen[a.Box] = true
		if a.Flip {
			flips++
		}
	}
	if len(seen) < 190 || flips < 60 || flips > 140 {
		t.Errorf("%d distinct boxes, %d flips of 200", len(seen), flips)
	}
	if a, b := p.DrawSized(42, 3, 0, 375, 500), p.DrawSized(42, 4, 0, 375, 500); a == b {
		t.Errorf("epochs 3 and 4 drew the same %+v", a)
	}
}

func TestGeoChains(t *testing.T) {
	in := Spec{C: 3, DType: sample.U8, Layout: sample.HWC}
	for _, c := range []struct {
		ops string
		ok  bool
		out Spec
	}{
		{"resize=256,center_crop=224,normalize=imagenet", true, Spec{224, 224, 3, sample.F32, sample.CHW}},
		{"center_crop=32,out=u8:chw", true, Spec{32, 32, 3, sample.U8, sample.CHW}},
		{"random_resized_crop=64:0.5-1:1-1,crop=60:2,flip=0.5,out=bf16:hwc", true, Spec{60, 60, 3, sample.BF16, sample.HWC}},
		{"resize=256", false, Spec{}},                          // size stays variable
		{"flip=0.5,resize=256,center_crop=224", false, Spec{}}, // geometric op not first
		{"resize=256,random_resized_crop=224", false, Spec{}},  // rrc must be alone
		{"center_crop=224,resize=256", false, Spec{}},
		{"random_resized_crop=224:0-1", false, Spec{}},
		{"random_resized_crop=224:0.5-0.4", false, Spec{}},
	} {
		ops, err := ParseOps(c.ops)
		if err != nil {
			t.Fatalf("%s: %v", c.ops, err)
		}
		if got := FormatOps(ops); got != c.ops {
			t.Errorf("FormatOps(ParseOps(%q)) = %q", c.ops, got)
		}
		p, err := NewPipeline(in, ops...)
		if (err == nil) != c.ok {
			t.Errorf("%s: err %v", c.ops, err)
			continue
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidOp) {
				t.Errorf("%s: %v does not match ErrInvalidOp", c.ops, err)
			}
			continue
		}
		if p.Out() != c.out || p.String() != c.ops {
			t.Errorf("%s: out %v, string %q", c.ops, p.Out(), p)
		}
	}
	// A fixed-size input with resize alone is fine: its size is known.
	if p, err := NewPipeline(Spec{H: 375, W: 500, C: 3, DType: sample.U8, Layout: sample.HWC}, Resize{Size: 256}); err != nil || p.Out().W != 341 {
		t.Errorf("fixed resize: %v, %v", p, err)
	}
	if _, err := NewPipeline(Spec{C: 3, DType: sample.U8, Layout: sample.CHW}, CenterCrop{Size: 8}); !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("chw input: %v", err)
	}
}

// TestApplySizedZeroAlloc: after a warm-up on the dataset's largest image,
// the two stages allocate nothing whatever the sizes and boxes.
func TestApplySizedZeroAlloc(t *testing.T) {
	ops, _ := ParseOps("random_resized_crop=32,flip,normalize=imagenet,out=f32:chw")
	p, err := NewPipeline(Spec{C: 3, DType: sample.U8, Layout: sample.HWC}, ops...)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	src := make([]byte, 120*160*3)
	for i := range src {
		src[i] = byte(r.Uint32())
	}
	dst := make([]byte, p.Out().Bytes())
	var sc Scratch
	sizes := [][2]int{{120, 160}, {100, 90}, {37, 150}, {120, 40}}
	run := func(i int64) {
		hw := sizes[i%int64(len(sizes))]
		prm := p.DrawSized(1, 0, i, hw[0], hw[1])
		if err := p.ApplySized(dst, src[:hw[0]*hw[1]*3], hw[0], hw[1], prm, &sc); err != nil {
			t.Fatal(err)
		}
	}
	// Warm up with full-image boxes: the widest kernels and rows.
	for _, hw := range sizes {
		prm := sample.Params{Box: sample.Box{W: int32(hw[1]), H: int32(hw[0])}}
		if err := p.ApplySized(dst, src[:hw[0]*hw[1]*3], hw[0], hw[1], prm, &sc); err != nil {
			t.Fatal(err)
		}
	}
	for i := range int64(64) {
		run(i)
	}
	var i int64
	if a := testing.AllocsPerRun(200, func() { run(i); i++ }); a != 0 {
		t.Errorf("ApplySized allocates %v times per call", a)
	}
	// A box outside the image is refused.
	err = p.ApplySized(dst, src[:40*40*3], 40, 40, sample.Params{Box: sample.Box{X: 10, W: 31, H: 5}}, &sc)
	if !errors.Is(err, ErrParams) {
		t.Errorf("box outside: %v", err)
	}
}

func TestBilinearIdentity(t *testing.T) {
	// Resampling to the same size copies: Pillow skips the pass, and its
	// weights are then 1 and 0.
	var c coeffs
	c.prepare(9, 0, 9, 9, 0, 9)
	for i := range 9 {
		if c.start[i] != i || c.k[i*c.ksize] != 1<<precisionBits {
			t.Fatalf("output %d: start %d, weight %d", i, c.start[i], c.k[i*c.ksize])
		}
	}
}

// TestSizedApplyMatchesReference: on a fixed-size input, Apply of a chain
// opening with a geometric op equals Reference (resample, then the
// oracle's ops), and Draw is DrawSized at In()'s size.
func TestSizedApplyMatchesReference(t *testing.T) {
	in := Spec{H: 37, W: 53, C: 3, DType: sample.U8, Layout: sample.HWC}
	for _, s := range []string{
		"random_resized_crop=16,flip=0.5,normalize=imagenet,out=f32:chw",
		"resize=20,center_crop=18,crop=16:2,flip=0.5,out=bf16:hwc",
		"center_crop=40,out=u8:chw",
	} {
		ops, err := ParseOps(s)
		if err != nil {
			t.Fatal(err)
		}
		p, err := NewPipeline(in, ops...)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		src := make([]byte, in.Bytes())
		for i := range src {
			src[i] = byte(i*13 + i/7)
		}
		got, want := make([]byte, p.Out().Bytes()), make([]byte, p.Out().Bytes())
		for i := range int64(20) {
			prm := p.Draw(3, 1, i)
			if prm != p.DrawSized(3, 1, i, in.H, in.W) {
				t.Fatalf("%s: Draw and DrawSized differ", s)
			}
			if err := p.Apply(got, src, prm); err != nil {
				t.Fatal(err)
			}
			if err := p.Reference(want, src, prm); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s: index %d: Apply differs from Reference", s, i)
			}
		}
	}
}

// TestApplyCroppedMatchesApplySized: given only its box's pixels, a
// random resized crop gives what it gives on the whole image; pipelines
// of whole images refuse a crop.
func TestApplyCroppedMatchesApplySized(t *testing.T) {
	ops, _ := ParseOps("random_resized_crop=48,flip,normalize=imagenet,out=f32:chw")
	p, err := NewPipeline(Spec{C: 3, DType: sample.U8, Layout: sample.HWC}, ops...)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	var sc Scratch
	want, got := make([]byte, p.Out().Bytes()), make([]byte, p.Out().Bytes())
	for i := range int64(300) {
		h, w := 1+r.IntN(300), 1+r.IntN(300)
		src := make([]byte, h*w*3)
		for k := range src {
			src[k] = byte(r.Uint32())
		}
		prm := p.DrawSized(9, 1, i, h, w)
		box, ok := p.CropBox(prm)
		if !ok {
			t.Fatalf("CropBox(%+v) refused a random resized crop", prm)
		}
		crop := make([]byte, 0, int(box.W)*int(box.H)*3)
		for y := range int(box.H) {
			crop = append(crop, src[((int(box.Y)+y)*w+int(box.X))*3:][:int(box.W)*3]...)
		}
		if err := p.ApplySized(want, src, h, w, prm, &sc); err != nil {
			t.Fatal(err)
		}
		if err := p.ApplyCropped(got, crop, h, w, prm, &sc); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%dx%d box %+v: ApplyCropped differs from ApplySized", w, h, box)
		}
		if err := p.ApplyCropped(got, crop[:len(crop)-1], h, w, prm, &sc); !errors.Is(err, ErrBufferSize) {
			t.Fatalf("short crop: %v", err)
		}
	}
	ops, _ = ParseOps("resize=40,center_crop=32,out=f32:chw")
	q, err := NewPipeline(Spec{C: 3, DType: sample.U8, Layout: sample.HWC}, ops...)
	if err != nil {
		t.Fatal(err)
	}
	prm := q.DrawSized(1, 0, 0, 50, 60)
	if _, ok := q.CropBox(prm); ok {
		t.Error("a resize pipeline offers a crop")
	}
	if err := q.ApplyCropped(got, make([]byte, 50*60*3), 50, 60, prm, &sc); !errors.Is(err, ErrParams) {
		t.Errorf("ApplyCropped on a resize pipeline: %v", err)
	}
}
