package loadertest

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/loaderd/loaderd/loader"
)

// root is the repository root, found from this file so that tests at any
// depth under loader/ reach the fixtures.
var root = func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}()

// Fixture returns the bytes of loader/testdata/formats/NAME.
func Fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "loader", "testdata", "formats", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// CIFARJPEGTar returns the path of the real CIFAR-10 training split as
// JPEGs in an image-folder layout (train/CLASS/NNNN.jpg), shared by the
// project beside the repository, and skips the test when it is absent.
func CIFARJPEGTar(t testing.TB) string {
	t.Helper()
	p := filepath.Join(root, "..", "shared", "data", "cifar10-train-jpg.tar")
	if _, err := os.Stat(p); os.IsNotExist(err) {
		t.Skipf("skipped: %s is absent (the real CIFAR-10 JPEGs; see ../shared/data/README.md)", p)
	}
	return p
}

// LargeImagesTar returns the path of the large-image set that
// scripts/make-large-images.py makes (3,000 ImageNet-sized JPEGs cut from
// Debian's background photographs), making it on first use in the user's
// cache directory. Without Debian's python3-pil or the photographs it
// skips the test, or fails it where LOADERD_REQUIRE_TURBO=1 (CI).
func LargeImagesTar(t testing.TB) string {
	t.Helper()
	p, err := MakeLargeImages(filepath.Join(root, "scripts", "make-large-images.py"))
	if err != nil {
		if os.Getenv("LOADERD_REQUIRE_TURBO") == "1" {
			t.Fatalf("LOADERD_REQUIRE_TURBO=1: %v", err)
		}
		t.Skipf("skipped: %v", err)
	}
	return p
}

// LargeImagesVersion names the set's file: change it with the script.
const LargeImagesVersion = "large-images-v1.tar"

// MakeLargeImages runs script (scripts/make-large-images.py) unless its
// output is in the cache already, and returns the tar's path.
func MakeLargeImages(script string) (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	dir = filepath.Join(dir, "loaderd")
	p := filepath.Join(dir, LargeImagesVersion)
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	out, err := exec.Command("/usr/bin/python3", script, p).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s: %v: %s (scripts/jpeg-setup.sh installs what it needs)", script, err, out)
	}
	return p, nil
}

// CIFAR10Classes are CIFAR-10's class names, in label order.
var CIFAR10Classes = []string{"airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"}

// Samples reads every sample of src: labels and pixels.
func Samples(t testing.TB, src loader.Source) ([]int32, [][]byte) {
	t.Helper()
	var labels []int32
	var pix [][]byte
	scratch := make([]byte, src.Spec().Bytes())
	for i := range src.Len() {
		l, p, err := src.Sample(i, scratch)
		if err != nil {
			t.Fatal(err)
		}
		labels = append(labels, l)
		pix = append(pix, bytes.Clone(p))
	}
	return labels, pix
}

// ReferenceRGB decodes data with a standard decoder and converts it to
// RGB HWC through At and color.NRGBAModel: slow, obviously right.
func ReferenceRGB(t testing.TB, data []byte, decode func(io.Reader) (image.Image, error)) []byte {
	t.Helper()
	img, err := decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return atRGB(img)
}

func atRGB(img image.Image) []byte {
	b := img.Bounds()
	out := make([]byte, 0, b.Dx()*b.Dy()*3)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
			out = append(out, c.R, c.G, c.B)
		}
	}
	return out
}

// WantRGB is the reference conversion: NRGBAModel, except that straight
// colour with alpha (16-bit NRGBA, Y'CbCr with alpha) is kept as stored,
// where NRGBAModel would round it through premultiplied alpha.
func WantRGB(img image.Image) []byte {
	if a, ok := img.(*image.NYCbCrA); ok {
		return atRGB(&a.YCbCr)
	}
	n, ok := img.(*image.NRGBA64)
	if !ok {
		return atRGB(img)
	}
	var out []byte
	b := n.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := n.NRGBA64At(x, y)
			out = append(out, uint8(c.R>>8), uint8(c.G>>8), uint8(c.B>>8))
		}
	}
	return out
}

// BadInput is a malformed input and the error it must give.
type BadInput struct {
	Spec string
	// Sample is the sample to read, "" when Open must fail: "#N" for
	// index N, else a name that find maps to an index.
	Sample string
	Want   error  // the sentinel the error wraps; nil: any
	File   string // what RecordError.File must contain
}

// CheckBadInputs opens each input and checks its error: the sentinel, and
// the file (and member) the *loader.RecordError names. find maps a sample
// name to its index; it may be nil when every Sample is "" or "#N".
func CheckBadInputs(t *testing.T, cases []BadInput, find func(t *testing.T, src loader.Source, name string) int64) {
	for _, tc := range cases {
		t.Run(tc.Spec+" "+tc.Sample, func(t *testing.T) {
			src, err := loader.Open(tc.Spec)
			if err == nil {
				defer src.Close()
				if tc.Sample == "" {
					t.Fatalf("Open succeeded, want %v", tc.Want)
				}
				var i int64
				if n, ok := strings.CutPrefix(tc.Sample, "#"); ok {
					i = int64(n[0] - '0')
				} else {
					i = find(t, src, tc.Sample)
				}
				_, _, err = src.Sample(i, make([]byte, src.Spec().Bytes()))
			} else if tc.Sample != "" {
				t.Fatalf("Open: %v", err)
			}
			var re *loader.RecordError
			switch {
			case err == nil:
				t.Fatalf("no error, want %v", tc.Want)
			case tc.Want != nil && !errors.Is(err, tc.Want):
				t.Fatalf("%v\nwant %v", err, tc.Want)
			case !errors.As(err, &re) || !strings.Contains(re.File, tc.File):
				t.Fatalf("%v\nwant a *RecordError naming %q", err, tc.File)
			}
			t.Log(err)
		})
	}
}

// CheckOpenErrors checks that Open(spec) fails with an error containing
// want, for each spec: options are checked, and typos are errors that say
// so.
func CheckOpenErrors(t *testing.T, cases map[string]string) {
	t.Helper()
	for spec, want := range cases {
		_, err := loader.Open(spec)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%q): %v, want an error containing %q", spec, err, want)
		}
	}
}

// WantRecordError checks that err wraps want and is a *loader.RecordError
// whose File ends with file, and fails the test at once if not.
func WantRecordError(t testing.TB, err, want error, file string) {
	t.Helper()
	var re *loader.RecordError
	if !errors.Is(err, want) || !errors.As(err, &re) || !strings.HasSuffix(re.File, file) {
		t.Fatalf("%v; want %v naming %s", err, want, file)
	}
	t.Log(err)
}

// AllocsPerRun is testing.AllocsPerRun, robust to what is not the code
// under test: it counts every allocation in the process, so goroutines
// an earlier test left winding down count too, and under a loaded CI
// machine they do. The decoders come from a sync.Pool, which a
// collection empties. So: one P, the collector paused, and the least of
// three measures — an allocation of the path itself shows in all three.
// It changes GOMAXPROCS and the GC percentage while it runs, so unlike
// the rest of this package it must not run beside other tests (no
// t.Parallel).
func AllocsPerRun(runs int, f func()) float64 {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	n := testing.AllocsPerRun(runs, f)
	for try := 1; try < 3 && n != 0; try++ {
		n = min(n, testing.AllocsPerRun(runs, f))
	}
	return n
}
