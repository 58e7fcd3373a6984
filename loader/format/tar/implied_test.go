package tar

import (
	"bytes"
	"image"
	"image/jpeg"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/imagedec"
)

// TestImpliedAnySize: a tar or folder of photographs of different sizes
// opened without size= is served as with size=any (its first images
// differ): each image at its own size, byte for byte the size=any
// stream, with size=any's maxpixels default. A chain that takes one size
// is refused with what to do instead. Images that all agree keep their
// one size, as before.
func TestImpliedAnySize(t *testing.T) {
	p, _ := varyingTar(t)
	dir := filepath.Join(filepath.Dir(p), "folder", "train")
	const ops = "random_resized_crop=64,flip=0.5,normalize=imagenet,out=f32:chw"
	for _, tc := range []struct{ name, implied, explicit string }{
		{"tar", "tar:" + p + "?decoder=go", "tar:" + p + "?size=any&decoder=go"},
		{"folder", "folder:" + dir + "?decoder=go", "folder:" + dir + "?size=any&decoder=go"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, src, _ := runStream(t, tc.implied, ops, 2)
			want, _, _ := runStream(t, tc.explicit, ops, 2)
			if !bytes.Equal(got.data, want.data) || !slices.Equal(got.params, want.params) {
				t.Fatalf("%s and %s streams differ", tc.implied, tc.explicit)
			}
			if s := src.Spec(); s.H != 0 || s.W != 0 || !loader.Caps(src).Has(loader.CapSized) {
				t.Fatalf("spec %v, caps %v: want images of varying size", s, loader.Caps(src))
			}
			if sz, _ := loader.As[loader.SizedSource](src); sz.MaxPixels() != imagedec.AnySizeMaxPixels {
				t.Errorf("maxpixels %d, want size=any's default %d", sz.MaxPixels(), imagedec.AnySizeMaxPixels)
			}
			pipe, err := augment.NewPipeline(augment.Spec{H: 64, W: 48, C: 3, DType: src.Spec().DType, Layout: src.Spec().Layout})
			if err != nil {
				t.Fatal(err)
			}
			// A chain built for one size: the loader refuses it, with
			// the fixes.
			_, err = loader.New(loader.NewPool(1), loader.Config{Source: src, Pipeline: pipe, BatchSize: 2, World: 1})
			if err == nil || !strings.Contains(err.Error(), "pipeline takes") || !strings.Contains(err.Error(), loader.VaryingSizeFix) {
				t.Errorf("a one-size pipeline over a varying source: %v", err)
			}
		})
	}

	// Same-size images keep their size (CIFAR as JPEGs).
	var ms []entry
	for i := range 3 {
		var b bytes.Buffer
		if err := jpeg.Encode(&b, image.NewRGBA(image.Rect(0, 0, 40, 30)), nil); err != nil {
			t.Fatal(err)
		}
		ms = append(ms, entry{name: "train/c" + string(rune('0'+i)) + "/x.jpg", data: b.Bytes()})
	}
	same := filepath.Join(t.TempDir(), "same.tar")
	writeTar(t, same, ms...)
	src, err := loader.Open("tar:" + same)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if s := src.Spec(); s.H != 30 || s.W != 40 {
		t.Errorf("images of one size: spec %v, want 40x30", s)
	}
}

// TestVaryingSizeErrors: what a user reads when images of varying size
// meet a chain or a dataset of one size names the real fixes.
func TestVaryingSizeErrors(t *testing.T) {
	p, _ := varyingTar(t)
	for _, want := range []string{"resize=N", "random_resized_crop=N", "?size=WxH&resize=bilinear"} {
		if !strings.Contains(loader.VaryingSizeFix, want) {
			t.Errorf("loader.VaryingSizeFix does not name %q", want)
		}
	}
	// A dataset of one declared size meets an image of another.
	fixed, err := loader.Open("tar:" + p + "?size=48x64&decoder=go")
	if err != nil {
		t.Fatal(err)
	}
	defer fixed.Close()
	_, _, err = fixed.Sample(1, make([]byte, fixed.Spec().Bytes()))
	for _, want := range []string{"train/c0/03.jpg", "is 121x120, want 48x64", "?size=any", "random_resized_crop=N", "?size=WxH&resize=bilinear"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("an image of another size: %v; want it to say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "declare resize=bilinear") {
		t.Errorf("%v: still advises resize=bilinear alone", err)
	}
}

// TestExactTorchvision: with exact=torchvision a stream's random resized
// crops are byte for byte the full-size decode's (PIL's pixels, as
// torchvision crops them), where the default decodes at a DCT scale.
func TestExactTorchvision(t *testing.T) {
	if err := imagedec.TurboAvailable(); err != nil {
		t.Skip(err) // only libjpeg-turbo decodes at a DCT scale
	}
	p, dims := varyingTar(t)
	const ops = "random_resized_crop=24" // small: most boxes allow 1/2 … 1/8
	for _, tc := range []struct {
		opts   string
		scaled bool // whether some sample may take a scaled decode
	}{
		{"?size=any&decoder=turbo", true},
		{"?size=any&decoder=turbo&exact=torchvision", false},
		{"?decoder=turbo&exact=torchvision", false}, // size=any implied
	} {
		t.Run(tc.opts, func(t *testing.T) {
			s, src, pipe := runStream(t, "tar:"+p+tc.opts, ops, 2)
			ts := src.(*source)
			d := &imagedec.Decoder{Backend: imagedec.TurboJPEG, MaxPixels: ts.MaxPixels()}
			buf := make([]byte, ts.MaxPixels()*3)
			out := pipe.Out().Bytes()
			got := make([]byte, out)
			var sc augment.Scratch
			scaled, differ := 0, 0
			for k, idx := range s.idx {
				hw := dims[ts.samples[idx].name]
				prm := s.params[k]
				if pipe.Scale(hw[0], hw[1], prm) > 1 {
					scaled++
				}
				// The non-scaled path: the whole image at full size.
				dec, err := d.DecodeSized(ts.data(idx), buf, loader.Want{})
				if err != nil || dec.Scale != 1 {
					t.Fatalf("sample %d: %+v, %v", idx, dec, err)
				}
				if err := pipe.ApplySized(got, imagedec.Pixels(buf, dec), dec.H, dec.W, prm, &sc); err != nil {
					t.Fatal(err)
				}
				same := bytes.Equal(got, s.data[k*out:(k+1)*out])
				if !same {
					differ++
				}
				if !tc.scaled && !same {
					t.Fatalf("sample %d (%dx%d, box %+v): exact=torchvision differs from the full decode", idx, hw[1], hw[0], prm.Box)
				}
			}
			if scaled == 0 {
				t.Fatal("no sample's box allows a scaled decode: the test shows nothing")
			}
			t.Logf("%d of %d samples' boxes allow a scaled decode; %d differ from the full decode", scaled, len(s.idx), differ)
		})
	}
	// The option is checked and is part of the dataset's identity.
	if _, err := loader.Open("tar:" + p + "?exact=pil"); err == nil || !strings.Contains(err.Error(), "the only exact= is torchvision") {
		t.Errorf("exact=pil: %v", err)
	}
	a, err := loader.Open("tar:" + p + "?size=any")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := loader.Open("tar:" + p + "?size=any&exact=torchvision")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	fa, errA := loader.Fingerprint(a)
	fb, errB := loader.Fingerprint(b)
	if errA != nil || errB != nil || fa == fb {
		t.Errorf("fingerprints %q, %q (%v, %v): exact= must change it", fa, fb, errA, errB)
	}
}
