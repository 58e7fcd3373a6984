package folder

import (
	"strings"
	"testing"

	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/imagedec"
	"github.com/loaderd/loaderd/loader/internal/loadertest"
)

// TestBadInputs maps each malformed fixture in testdata/formats/bad that
// the folder format reads to its error: the sentinel, and the file the
// *RecordError names. (The other formats' tests check theirs.)
func TestBadInputs(t *testing.T) {
	const bad = fixtures + "bad/"
	images := "folder:" + bad + "images?size=8x6"
	loadertest.CheckBadInputs(t, []loadertest.BadInput{
		{Spec: "folder:" + bad + "badext", Want: imagedec.ErrExtension, File: "cls/notes.txt"},
		{Spec: "folder:" + bad + "emptyclass", Want: loader.ErrEmptyClass, File: "emptyclass/b"},
		{Spec: images, Sample: "bomb.jpg", Want: imagedec.ErrTooLarge, File: "c/bomb.jpg"},
		{Spec: images, Sample: "bomb.png", Want: imagedec.ErrTooLarge, File: "c/bomb.png"},
		{Spec: images, Sample: "corrupt.jpg", Want: loader.ErrCorrupt, File: "c/corrupt.jpg"},
		{Spec: images, Sample: "notimage.jpg", Want: imagedec.ErrFormat, File: "c/notimage.jpg"},
		{Spec: images, Sample: "truncated.jpg", Want: loader.ErrTruncated, File: "c/truncated.jpg"},
		{Spec: images, Sample: "truncated.png", Want: loader.ErrTruncated, File: "c/truncated.png"},
		{Spec: images, Sample: "wrongsize.png", Want: imagedec.ErrSize, File: "c/wrongsize.png"},
	}, sampleNamed)
}

// sampleNamed finds the index of the sample whose path ends in name.
func sampleNamed(t *testing.T, src loader.Source, name string) int64 {
	f, ok := src.(*source)
	if !ok {
		t.Fatalf("%s is not a folder", src)
	}
	for i := range f.Len() {
		if strings.HasSuffix(f.Path(i), "/"+name) {
			return i
		}
	}
	t.Fatalf("no sample %s in %s", name, src)
	return 0
}

// TestFormatOptions: options are checked, typos and unsupported ones are
// errors that say so.
func TestFormatOptions(t *testing.T) {
	loadertest.CheckOpenErrors(t, map[string]string{
		"folder:" + fixtures + "folder?szie=8x6":     `unknown option "szie"`,
		"folder:" + fixtures + "folder?size=8by6":    "size=8by6",
		"folder:" + fixtures + "folder?resize=bilin": "the only resize is bilinear",
		"folder:" + fixtures + "folder?maxpixels=-1": "maxpixels=-1",
		"folder:": "no path given",
	})
}
