package tar

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/imagedec"
	"github.com/loaderd/loaderd/loader/internal/loadertest"
)

// varyingTar writes a folder-layout tar of JPEGs of varying sizes, made
// with Go's encoder, and returns its path and each member's size.
func varyingTar(t testing.TB) (string, map[string][2]int) {
	t.Helper()
	sizes := [][2]int{{48, 64}, {300, 200}, {389, 517}, {120, 121}, {33, 400}, {640, 480},
		{256, 256}, {97, 150}, {500, 375}, {70, 70}, {211, 333}, {480, 640}}
	var ms []entry
	dims := map[string][2]int{}
	for i, hw := range sizes {
		img := image.NewRGBA(image.Rect(0, 0, hw[1], hw[0]))
		for y := range hw[0] {
			for x := range hw[1] {
				img.Set(x, y, color.RGBA{uint8(x*255/hw[1]) ^ uint8(i*20), uint8(y * 255 / hw[0]), uint8((x*y)>>4 + i*9), 255})
			}
		}
		var b bytes.Buffer
		if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 90}); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("train/c%d/%02d.jpg", i%3, i)
		ms = append(ms, entry{name: name, data: b.Bytes()})
		dims[name] = hw
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "varying.tar")
	writeTar(t, p, ms...)
	// The same files as a folder, for the folder format.
	for _, m := range ms {
		f := filepath.Join(dir, "folder", filepath.FromSlash(m.name))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, m.data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return p, dims
}

type streamed struct {
	data   []byte
	params []sample.Params
	idx    []int64
}

func runStream(t *testing.T, spec, ops string, workers int) (streamed, loader.Source, *augment.Pipeline) {
	t.Helper()
	src, err := loader.Open(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	o, err := augment.ParseOps(ops)
	if err != nil {
		t.Fatal(err)
	}
	pipe, err := augment.NewPipeline(src.Spec(), o...)
	if err != nil {
		t.Fatal(err)
	}
	pool := loader.NewPool(workers)
	defer pool.Close()
	l, err := loader.New(pool, loader.Config{Source: src, Pipeline: pipe, Seed: 9, Shuffle: true,
		BatchSize: 5, World: 1, Epochs: 2, WithParams: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var s streamed
	for {
		b, err := l.Next(context.Background())
		if err != nil {
			break
		}
		s.data = append(s.data, b.Data...)
		s.params = append(s.params, b.Params...)
		s.idx = append(s.idx, b.Indices...)
		b.Release()
	}
	if len(s.idx) != 24 {
		t.Fatalf("%d samples over 2 epochs, want 24", len(s.idx))
	}
	return s, src, pipe
}

// TestSizedTarEndToEnd streams a tar of JPEGs of twelve sizes through
// random_resized_crop, flip, normalize and f32 CHW with 1 and 2 workers:
// the batches and the params are identical; every box lies in its image;
// and each sample equals decoding it alone at the scale the pipeline
// picks and applying the pipeline with the reported params — the whole
// image, and the crop alone where the workers decoded only that.
func TestSizedTarEndToEnd(t *testing.T) {
	p, dims := varyingTar(t)
	backends := []string{"go"}
	if imagedec.TurboAvailable() == nil {
		backends = append(backends, "turbo")
	}
	const ops = "random_resized_crop=128,flip=0.5,normalize=imagenet,out=f32:chw"
	for _, be := range backends {
		t.Run(be, func(t *testing.T) {
			spec := "tar:" + p + "?size=any&maxpixels=400000&decoder=" + be
			one, src, pipe := runStream(t, spec, ops, 1)
			two, _, _ := runStream(t, spec, ops, 2)
			if !bytes.Equal(one.data, two.data) || !slices.Equal(one.params, two.params) || !slices.Equal(one.idx, two.idx) {
				t.Fatal("1 worker and 2 workers differ")
			}
			dir := filepath.Join(filepath.Dir(p), "folder", "train")
			fs, _, _ := runStream(t, "folder:"+dir+"?size=any&maxpixels=400000&decoder="+be, ops, 2)
			if !bytes.Equal(one.data, fs.data) || !slices.Equal(one.params, fs.params) {
				t.Fatal("folder:…?size=any and tar:…?size=any differ")
			}
			if src.Spec() != (augment.Spec{C: 3, DType: sample.U8, Layout: sample.HWC}) {
				t.Fatalf("spec %v", src.Spec())
			}
			ts := src.(*source)
			out := pipe.Out().Bytes()
			var sc augment.Scratch
			buf := make([]byte, ts.MaxPixels()*3)
			got := make([]byte, out)
			backend, _ := imagedec.ChooseBackend(be)
			d := &imagedec.Decoder{Backend: backend, MaxPixels: ts.MaxPixels()}
			scaled, cropped := 0, 0
			for k, idx := range one.idx {
				hw := dims[ts.samples[idx].name]
				prm := one.params[k]
				if b := prm.Box; b.W <= 0 || b.H <= 0 || b.X < 0 || b.Y < 0 || int(b.X+b.W) > hw[1] || int(b.Y+b.H) > hw[0] {
					t.Fatalf("sample %d %v: box %+v outside the image", idx, hw, b)
				}
				dec, err := d.DecodeSized(ts.data(idx), buf, loader.Want{Scale: pipe.Scale(hw[0], hw[1], prm)})
				if err != nil || dec.H != hw[0] || dec.W != hw[1] || !dec.Whole() {
					t.Fatalf("sample %d: %+v, %v", idx, dec, err)
				}
				if dec.Scale > 1 {
					scaled++
				}
				if err := pipe.ApplyScaled(got, imagedec.Pixels(buf, dec), dec.H, dec.W, dec.Scale, prm, &sc); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, one.data[k*out:(k+1)*out]) {
					t.Fatalf("sample %d differs from decoding it alone", idx)
				}
				// What the stream's workers do: ask for the crop too.
				box, _ := pipe.CropBox(prm)
				dec, err = d.DecodeSized(ts.data(idx), buf, loader.Want{Scale: pipe.Scale(hw[0], hw[1], prm), Crop: box})
				if err != nil || dec.Whole() {
					continue
				}
				cropped++
				if dec.Scale != 1 || dec.Box != box {
					t.Fatalf("sample %d: asked for box %+v, decoded %+v", idx, box, dec)
				}
				if err := pipe.ApplyCropped(got, imagedec.Pixels(buf, dec), dec.H, dec.W, prm, &sc); err != nil || !bytes.Equal(got, one.data[k*out:(k+1)*out]) {
					t.Fatalf("sample %d: decode-and-crop differs from the stream (%v)", idx, err)
				}
			}
			t.Logf("%s: of %d samples %d decoded at a DCT scale, %d cropped", be, len(one.idx), scaled, cropped)
			if be == "turbo" && imagedec.CropAvailable() == nil && cropped == 0 {
				t.Fatal("no sample was decoded as a crop")
			}
		})
	}
}

// TestScaledDecodeDifference measures what decoding at a DCT scale
// changes against full decode + resize, on the large-image set
// (ImageNet-sized photographs), for random_resized_crop=224 with u8
// output: the mean and largest absolute difference per byte. The bound
// is loose on purpose (a mean under 2 levels of 255); the figures are
// logged for the documentation.
func TestScaledDecodeDifference(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes 300 large JPEGs twice")
	}
	if err := imagedec.TurboAvailable(); err != nil {
		t.Skip(err)
	}
	p := loadertest.LargeImagesTar(t)
	src, err := loader.Open("tar:" + p + "?size=any&decoder=turbo")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ts := src.(*source)
	ops, _ := augment.ParseOps("random_resized_crop=224")
	pipe, err := augment.NewPipeline(src.Spec(), ops...)
	if err != nil {
		t.Fatal(err)
	}
	dc := &imagedec.Decoder{Backend: imagedec.TurboJPEG, MaxPixels: ts.MaxPixels()}
	buf := make([]byte, ts.MaxPixels()*3)
	full, scaled := make([]byte, pipe.Out().Bytes()), make([]byte, pipe.Out().Bytes())
	var sc augment.Scratch
	var sum, n, big int64
	maxd, byScale := 0, map[int]int{}
	for i := int64(0); i < min(300, ts.Len()); i++ {
		dec, err := dc.DecodeSized(ts.data(i), buf, loader.Want{})
		if err != nil {
			t.Fatal(err)
		}
		h, w := dec.H, dec.W
		prm := pipe.DrawSized(1, 0, i, h, w)
		if err := pipe.ApplySized(full, imagedec.Pixels(buf, dec), h, w, prm, &sc); err != nil {
			t.Fatal(err)
		}
		if dec, err = dc.DecodeSized(ts.data(i), buf, loader.Want{Scale: pipe.Scale(h, w, prm)}); err != nil {
			t.Fatal(err)
		}
		d := dec.Scale
		byScale[d]++
		if d == 1 {
			continue
		}
		if err := pipe.ApplyScaled(scaled, imagedec.Pixels(buf, dec), h, w, d, prm, &sc); err != nil {
			t.Fatal(err)
		}
		for j := range full {
			dv := max(int(full[j])-int(scaled[j]), int(scaled[j])-int(full[j]))
			sum += int64(dv)
			maxd = max(maxd, dv)
			if dv > 8 {
				big++
			}
			n++
		}
	}
	if n == 0 {
		t.Skip("no image took a scaled decode")
	}
	mean := float64(sum) / float64(n)
	t.Logf("scales %v; scaled vs full decode: mean |diff| %.3f, max %d, %.4f%% of bytes off by more than 8", byScale, mean, maxd, 100*float64(big)/float64(n))
	if mean > 2 {
		t.Errorf("mean difference %.3f levels", mean)
	}
}

// TestSizedSteadyStateAllocs: decode (at the scale the params allow) and
// the two-stage transform allocate nothing once a worker's buffers have
// seen the dataset's images. Without libjpeg-turbo the decoder is Go's
// image/jpeg, which allocates its state and the image for every image
// (imagedec's TestDecodeAllocs): then everything but the decoder must
// allocate nothing.
func TestSizedSteadyStateAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops decoders under the race detector")
	}
	p, dims := varyingTar(t)
	be := "go"
	if imagedec.TurboAvailable() == nil {
		be = "turbo"
	}
	src, err := loader.Open("tar:" + p + "?size=any&maxpixels=400000&decoder=" + be)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ts := src.(*source)
	ops, _ := augment.ParseOps("random_resized_crop=64,flip=0.5,normalize=imagenet,out=bf16:chw")
	pipe, err := augment.NewPipeline(src.Spec(), ops...)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, ts.MaxPixels()*3)
	dst := make([]byte, pipe.Out().Bytes())
	var sc augment.Scratch
	sz := &sizer{p: pipe}
	cropped := 0
	sample := func(i int64) {
		sz.idx = i
		_, pix, dec, err := ts.SampleSized(i%ts.Len(), buf, sz)
		if err == nil {
			if !dec.Whole() {
				cropped++
			}
			err = pipe.ApplyDecoded(dst, pix, dec.H, dec.W, dec.Scale, dec.Box, sz.prm, &sc)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 * ts.Len() {
		sample(i)
	}
	if be == "go" {
		// Each image once per run, sampled and decoded alone: the totals
		// compare whatever each image's decode allocates.
		var files [][]byte
		for name := range dims {
			data, err := os.ReadFile(filepath.Join(filepath.Dir(p), "folder", filepath.FromSlash(name)))
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, data)
		}
		if int64(len(files)) != ts.Len() {
			t.Fatalf("%d files for %d samples", len(files), ts.Len())
		}
		d := &imagedec.Decoder{Backend: imagedec.GoJPEG, MaxPixels: ts.MaxPixels()}
		dec := allocsPerRun(20, func() {
			for _, data := range files {
				if _, err := d.DecodeSized(data, buf, loader.Want{}); err != nil {
					t.Fatal(err)
				}
			}
		})
		var i int64
		n := allocsPerRun(20, func() {
			for range ts.Len() {
				sample(i)
				i++
			}
		})
		t.Logf("%v allocations per %d samples, %v per decoding them alone", n, ts.Len(), dec)
		if n > dec {
			t.Errorf("%v allocations per %d samples, %v of them image/jpeg's decoding: want none but those", n, ts.Len(), dec)
		}
		return
	}
	var i int64
	if n := allocsPerRun(100, func() { sample(i); i++ }); n != 0 {
		t.Errorf("%v allocations per sample, want 0", n)
	}
	if be == "turbo" && imagedec.CropAvailable() == nil && cropped == 0 {
		t.Error("no sample was decoded as a crop")
	}
}

// sizer draws the params from the header's size and asks for their scale
// and crop, as the loader's worker does.
type sizer struct {
	p   *augment.Pipeline
	idx int64
	prm sample.Params
}

func (s *sizer) Want(h, w int) loader.Want {
	s.prm = s.p.DrawSized(5, 0, s.idx, h, w)
	box, _ := s.p.CropBox(s.prm)
	return loader.Want{Scale: s.p.Scale(h, w, s.prm), Crop: box}
}
