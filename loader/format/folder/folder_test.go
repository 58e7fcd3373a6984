package folder

import (
	"bytes"
	"image"
	_ "image/gif" // the standard decoders, for reference
	_ "image/jpeg"
	_ "image/png"
	"os"
	"path/filepath"
	"slices"
	"testing"

	_ "golang.org/x/image/bmp"
	_ "golang.org/x/image/tiff"

	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/imagedec"
	"github.com/loaderd/loaderd/loader/internal/loadertest"
)

// The fixtures are shared with the other formats' tests.
const fixtures = "../../testdata/formats/"

// TestFolder: classes sorted, samples by class then path (nested
// directories included, hidden files and root files left out), every
// format decoded to the reference pixels.
func TestFolder(t *testing.T) {
	f, err := open(fixtures + "folder?decoder=go") // image/jpeg is the reference
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := []string{"bird/0.png", "bird/1.jpg", "cat/2.gif", "cat/4.TIFF", "cat/sub/3.bmp"}
	var got []string
	for i := range f.Len() {
		rel, _ := filepath.Rel(fixtures+"folder", f.Path(i))
		got = append(got, filepath.ToSlash(rel))
	}
	if !slices.Equal(got, want) || !slices.Equal(f.Classes(), []string{"bird", "cat"}) {
		t.Fatalf("samples %v classes %v, want %v [bird cat]", got, f.Classes(), want)
	}
	if s := f.Spec(); s.H != 6 || s.W != 8 || s.C != 3 {
		t.Fatalf("spec %v, want 6x8x3 from the first image", s)
	}
	labels, pix := loadertest.Samples(t, f)
	if !slices.Equal(labels, []int32{0, 0, 1, 1, 1}) {
		t.Fatalf("labels %v", labels)
	}
	for i, p := range pix {
		data, err := os.ReadFile(f.Path(int64(i)))
		if err != nil {
			t.Fatal(err)
		}
		ref, _, err := image.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(p, loadertest.WantRGB(ref)) {
			t.Errorf("%s: pixels differ from the reference decode", f.Path(int64(i)))
		}
	}
	if _, _, err := f.Sample(5, make([]byte, 144)); err == nil {
		t.Fatal("sample 5 of 5: no error")
	}
}

// TestFolderLinkedClass: a class directory may be a symbolic link.
func TestFolderLinkedClass(t *testing.T) {
	dir := t.TempDir()
	abs, err := filepath.Abs(fixtures + "folder/cat")
	if err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(dir, "a"), 0o755)
	os.WriteFile(filepath.Join(dir, "a", "0.png"), loadertest.Fixture(t, "img/rgb.png"), 0o644)
	if err := os.Symlink(abs, filepath.Join(dir, "b")); err != nil {
		t.Fatal(err)
	}
	f, err := open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if f.Len() != 4 || !slices.Equal(f.Classes(), []string{"a", "b"}) {
		t.Fatalf("%d samples, classes %v; want 4, [a b]", f.Len(), f.Classes())
	}
}

// TestFolderResize: resize=bilinear gives imagedec's resized pixels.
func TestFolderResize(t *testing.T) {
	data := loadertest.Fixture(t, "img/rgb.png") // 8×6, the folder's first image
	want := make([]byte, 5*3*3)
	if err := (&imagedec.Decoder{H: 3, W: 5, Resize: true}).Decode(data, want); err != nil {
		t.Fatal(err)
	}
	f, err := open(fixtures + "folder?size=5x3&resize=bilinear")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, p, err := f.Sample(0, make([]byte, 45)); err != nil || !bytes.Equal(p, want) {
		t.Fatalf("folder with resize: %v", err)
	}
}

// TestOpenErrorIsNilSource: a failed Open returns a nil interface.
func TestOpenErrorIsNilSource(t *testing.T) {
	if src, err := loader.Open("folder:" + fixtures + "nope"); err == nil || src != nil {
		t.Errorf("Open = %v, %v; want nil and an error", src, err)
	}
}
