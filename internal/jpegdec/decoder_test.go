package jpegdec

import (
	"archive/tar"
	"bytes"
	"fmt"
	"image"
	"image/jpeg"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// same reports how a (from a Decoder) differs from b (from image/jpeg), or "".
func same(a, b image.Image) string {
	if reflect.TypeOf(a) != reflect.TypeOf(b) {
		return fmt.Sprintf("type %T, want %T", a, b)
	}
	if a.Bounds() != b.Bounds() {
		return fmt.Sprintf("bounds %v, want %v", a.Bounds(), b.Bounds())
	}
	switch a := a.(type) {
	case *image.YCbCr:
		b := b.(*image.YCbCr)
		if a.SubsampleRatio != b.SubsampleRatio {
			return fmt.Sprintf("ratio %v, want %v", a.SubsampleRatio, b.SubsampleRatio)
		}
		r := a.Bounds()
		for y := r.Min.Y; y < r.Max.Y; y++ {
			for x := r.Min.X; x < r.Max.X; x++ {
				if a.Y[a.YOffset(x, y)] != b.Y[b.YOffset(x, y)] || a.Cb[a.COffset(x, y)] != b.Cb[b.COffset(x, y)] ||
					a.Cr[a.COffset(x, y)] != b.Cr[b.COffset(x, y)] {
					return fmt.Sprintf("pixel (%d,%d) differs", x, y)
				}
			}
		}
		return ""
	}
	// Gray, RGBA and CMYK: compare colours (tests only; never a hot path).
	r := a.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if a.At(x, y) != b.At(x, y) {
				return fmt.Sprintf("pixel (%d,%d) is %v, want %v", x, y, a.At(x, y), b.At(x, y))
			}
		}
	}
	return ""
}

func fixtures(t testing.TB) map[string][]byte {
	t.Helper()
	names, err := filepath.Glob("testdata/*.jpeg")
	if err != nil || len(names) < 10 {
		t.Fatalf("fixtures: %v, %d files", err, len(names))
	}
	out := map[string][]byte{}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(n)] = b
	}
	return out
}

// TestMatchesStdlib decodes every fixture (all subsampling ratios,
// progressive, restart markers, RGB, CMYK, grey, truncated) with one reused
// Decoder, in two orders so that each image follows a different one, and
// compares with image/jpeg: same error or same pixels.
func TestMatchesStdlib(t *testing.T) {
	fx := fixtures(t)
	var names []string
	for n := range fx {
		names = append(names, n)
	}
	var dec Decoder
	for pass := range 2 {
		for i := range names {
			name := names[i]
			if pass == 1 {
				name = names[len(names)-1-i]
			}
			data := fx[name]
			want, wantErr := jpeg.Decode(bytes.NewReader(data))
			got, err := dec.Decode(data)
			if (err != nil) != (wantErr != nil) || (err != nil && err.Error() != wantErr.Error()) {
				t.Fatalf("%s: error %v, want %v", name, err, wantErr)
			}
			if err != nil {
				continue
			}
			if d := same(got, want); d != "" {
				t.Fatalf("%s (pass %d): %s", name, pass, d)
			}
			cfg, err := dec.DecodeConfig(data)
			wcfg, _ := jpeg.DecodeConfig(bytes.NewReader(data))
			if err != nil || cfg != wcfg {
				t.Fatalf("%s: config %+v, %v; want %+v", name, cfg, err, wcfg)
			}
		}
	}
}

// TestNoStaleState: a JPEG that relies on tables it never defines fails
// as it does in image/jpeg, even after an image that defined them.
func TestNoStaleState(t *testing.T) {
	data := fixtures(t)["video-001.q50.420.jpeg"]
	// Drop every DHT segment: the scan then uses undefined tables.
	var stripped []byte
	stripped = append(stripped, data[:2]...)
	for i := 2; i+4 <= len(data); {
		if data[i] != 0xff {
			t.Fatal("unexpected layout")
		}
		m, n := data[i+1], int(data[i+2])<<8|int(data[i+3])
		if m == 0xda { // SOS: keep the rest as is
			stripped = append(stripped, data[i:]...)
			break
		}
		if m != 0xc4 {
			stripped = append(stripped, data[i:i+2+n]...)
		}
		i += 2 + n
	}
	_, wantErr := jpeg.Decode(bytes.NewReader(stripped))
	if wantErr == nil {
		t.Fatal("image/jpeg decodes a JPEG without Huffman tables")
	}
	var dec Decoder
	if _, err := dec.Decode(data); err != nil {
		t.Fatal(err)
	}
	if _, err := dec.Decode(stripped); err == nil || err.Error() != wantErr.Error() {
		t.Fatalf("after a good image: %v, want %v", err, wantErr)
	}
}

// TestAllocs: decoding the same size again allocates nothing.
func TestAllocs(t *testing.T) {
	data := fixtures(t)["video-001.q50.420.jpeg"]
	var dec Decoder
	if _, err := dec.Decode(data); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(50, func() { dec.Decode(data) }); n != 0 {
		t.Fatalf("%v allocations per Decode, want 0", n)
	}
	if n := testing.AllocsPerRun(50, func() { dec.DecodeConfig(data) }); n != 0 {
		t.Fatalf("%v allocations per DecodeConfig, want 0", n)
	}
}

// TestCIFARJPEGs compares a sample of the real CIFAR-10 JPEGs with image/jpeg.
func TestCIFARJPEGs(t *testing.T) {
	const path = "../../../shared/data/cifar10-train-jpg.tar"
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		t.Skipf("skipped: %s is absent", path)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	var dec Decoder
	n := 0
	for i := 0; ; i++ {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg || i%7 != 0 {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		want, err := jpeg.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatal(h.Name, err)
		}
		got, err := dec.Decode(data)
		if err != nil {
			t.Fatal(h.Name, err)
		}
		if d := same(got, want); d != "" {
			t.Fatalf("%s: %s", h.Name, d)
		}
		n++
	}
	if n < 7000 {
		t.Fatalf("compared %d images, want over 7000", n)
	}
}

// FuzzDecode is differential: on any input the Decoder must agree with
// image/jpeg, error for error and pixel for pixel, including right after a
// valid image has left its buffers and tables behind.
func FuzzDecode(f *testing.F) {
	for _, data := range fixtures(f) {
		f.Add(data)
	}
	f.Add([]byte{0xff, 0xd8, 0xff, 0xd9})
	warm := fixtures(f)["video-001.q50.444.jpeg"]
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := jpeg.DecodeConfig(bytes.NewReader(data))
		if err == nil && cfg.Width*cfg.Height > 1<<18 {
			return // keep each run short; size is not what this compares
		}
		var dec Decoder
		dec.Decode(warm)
		want, wantErr := jpeg.Decode(bytes.NewReader(data))
		got, err := dec.Decode(data)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("error %v, want %v", err, wantErr)
		}
		if err == nil {
			if d := same(got, want); d != "" {
				t.Fatal(d)
			}
		}
	})
}
