package augment

import (
	"bytes"
	"errors"
	"testing"

	"github.com/loaderd/loaderd/client/sample"
)

// TestApplyDecoded: the pipeline takes what a decoder reports it decoded
// — the whole image at any scale (ApplyScaled), the crop box alone at
// scale 1 (ApplyCropped, the whole image's bytes) — and refuses any other
// region rather than guess what its bytes are.
func TestApplyDecoded(t *testing.T) {
	ops, _ := ParseOps("random_resized_crop=24,flip=0.5,out=u8:hwc")
	p, err := NewPipeline(Spec{C: 3, DType: sample.U8, Layout: sample.HWC}, ops...)
	if err != nil {
		t.Fatal(err)
	}
	const h, w = 90, 120
	src := make([]byte, h*w*3)
	for k := range src {
		src[k] = byte(k*7 + k/360)
	}
	prm := p.DrawSized(3, 0, 5, h, w)
	box, _ := p.CropBox(prm)
	crop := make([]byte, 0, int(box.W)*int(box.H)*3)
	for y := range int(box.H) {
		crop = append(crop, src[((int(box.Y)+y)*w+int(box.X))*3:][:int(box.W)*3]...)
	}
	half := make([]byte, 45*60*3)
	var sc Scratch
	want, got := make([]byte, p.Out().Bytes()), make([]byte, p.Out().Bytes())
	if err := p.ApplySized(want, src, h, w, prm, &sc); err != nil {
		t.Fatal(err)
	}
	scaled := make([]byte, p.Out().Bytes())
	if err := p.ApplyScaled(scaled, half, h, w, 2, prm, &sc); err != nil {
		t.Fatal(err)
	}
	whole := sample.Box{W: w, H: h}
	for _, c := range []struct {
		name   string
		src    []byte
		d      int
		region sample.Box
		want   []byte // nil: ErrParams
	}{
		{"whole", src, 1, whole, want},
		{"whole at 1/2", half, 2, whole, scaled},
		{"the crop", crop, 1, box, want},
		{"the crop at 1/2", crop, 2, box, nil},
		{"another region", crop, 1, sample.Box{X: box.X + 1, Y: box.Y, W: box.W, H: box.H}, nil},
		{"no region", crop, 1, sample.Box{}, nil},
	} {
		err := p.ApplyDecoded(got, c.src, h, w, c.d, c.region, prm, &sc)
		switch {
		case c.want == nil && !errors.Is(err, ErrParams):
			t.Errorf("%s: %v, want ErrParams", c.name, err)
		case c.want != nil && (err != nil || !bytes.Equal(got, c.want)):
			t.Errorf("%s: %v, equal %v", c.name, err, bytes.Equal(got, c.want))
		}
	}
}
