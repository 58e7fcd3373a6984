package loader

import (
	"bytes"
	"image"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestFolder: classes sorted, samples by class then path (nested
// directories included, hidden files and root files left out), every
// format decoded to the reference pixels.
func TestFolder(t *testing.T) {
	f, err := OpenFolder("testdata/formats/folder")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := []string{"bird/0.png", "bird/1.jpg", "cat/2.gif", "cat/4.TIFF", "cat/sub/3.bmp"}
	var got []string
	for i := range f.Len() {
		rel, _ := filepath.Rel("testdata/formats/folder", f.Path(i))
		got = append(got, filepath.ToSlash(rel))
	}
	if !slices.Equal(got, want) || !slices.Equal(f.Classes(), []string{"bird", "cat"}) {
		t.Fatalf("samples %v classes %v, want %v [bird cat]", got, f.Classes(), want)
	}
	if s := f.Spec(); s.H != 6 || s.W != 8 || s.C != 3 {
		t.Fatalf("spec %v, want 6x8x3 from the first image", s)
	}
	labels, pix := samples(t, f)
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
		if !bytes.Equal(p, wantRGB(ref)) {
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
	abs, err := filepath.Abs("testdata/formats/folder/cat")
	if err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(dir, "a"), 0o755)
	os.WriteFile(filepath.Join(dir, "a", "0.png"), fixture(t, "img/rgb.png"), 0o644)
	if err := os.Symlink(abs, filepath.Join(dir, "b")); err != nil {
		t.Fatal(err)
	}
	f, err := OpenFolder(dir)
	if err != nil {
		t.Fatal(err)
	}
	if f.Len() != 4 || !slices.Equal(f.Classes(), []string{"a", "b"}) {
		t.Fatalf("%d samples, classes %v; want 4, [a b]", f.Len(), f.Classes())
	}
}
