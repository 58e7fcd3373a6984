package loader

import (
	"errors"
	"strings"
	"testing"
)

// TestBadInputs maps each malformed fixture in testdata/formats/bad to its
// error: the sentinel, and the file (and member) the *RecordError names.
// sample is the file name of the sample to read, "" when Open must fail.
func TestBadInputs(t *testing.T) {
	const bad = "testdata/formats/bad/"
	images := "folder:" + bad + "images?size=8x6"
	for _, tc := range []struct {
		spec, sample string
		want         error
		file         string // what RecordError.File must contain
	}{
		{"folder:" + bad + "badext", "", ErrExtension, "cls/notes.txt"},
		{"folder:" + bad + "emptyclass", "", ErrEmptyClass, "emptyclass/b"},
		{images, "bomb.jpg", ErrImageTooLarge, "c/bomb.jpg"},
		{images, "bomb.png", ErrImageTooLarge, "c/bomb.png"},
		{images, "corrupt.jpg", ErrCorrupt, "c/corrupt.jpg"},
		{images, "notimage.jpg", ErrImageFormat, "c/notimage.jpg"},
		{images, "truncated.jpg", ErrTruncated, "c/truncated.jpg"},
		{images, "truncated.png", ErrTruncated, "c/truncated.png"},
		{images, "wrongsize.png", ErrImageSize, "c/wrongsize.png"},
		{"tar:" + bad + "lying-big.tar", "", ErrCorrupt, "lying-big.tar"},
		{"tar:" + bad + "lying-huge.tar", "", ErrTruncated, "lying-huge.tar"},
		{"tar:" + bad + "lying-small.tar", "", ErrCorrupt, "lying-small.tar"},
		{"tar:" + bad + "lying-zeros.tar", "", ErrCorrupt, "lying-zeros.tar"},
		{"tar:" + bad + "ext.tar", "", ErrExtension, "ext.tar(train/a/notes.txt)"},
		{"tar:" + bad + "wds-nolabel.tar", "", ErrLabel, "wds-nolabel.tar(s1.png)"},
		{"tar:" + bad + "wds-badlabel.tar", "", ErrLabel, "wds-badlabel.tar(s0.cls)"},
		{"arrow:" + bad + "label.arrow", "#1", ErrLabel, "label.arrow"},
		{"arrow:" + bad + "truncated.arrow", "", ErrCorrupt, "truncated.arrow"},
		{"parquet:" + bad + "columns.parquet", "", ErrColumn, "columns.parquet"},
		{"parquet:" + bad + "truncated.parquet", "", ErrCorrupt, "truncated.parquet"},
		{"tar:" + bad + "nothing-*.tar", "", nil, "nothing-*.tar"},
	} {
		t.Run(strings.TrimPrefix(tc.spec+" "+tc.sample, "folder:"), func(t *testing.T) {
			src, err := Open(tc.spec)
			if err == nil {
				defer src.Close()
				if tc.sample == "" {
					t.Fatalf("Open succeeded, want %v", tc.want)
				}
				_, _, err = src.Sample(sampleNamed(t, src, tc.sample), make([]byte, src.Spec().Bytes()))
			} else if tc.sample != "" {
				t.Fatalf("Open: %v", err)
			}
			var re *RecordError
			switch {
			case err == nil:
				t.Fatalf("no error, want %v", tc.want)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("%v\nwant %v", err, tc.want)
			case !errors.As(err, &re) || !strings.Contains(re.File, tc.file):
				t.Fatalf("%v\nwant a *RecordError naming %q", err, tc.file)
			}
			t.Log(err)
		})
	}
}

// sampleNamed finds the index of the sample whose path ends in name, or
// "#N" for index N.
func sampleNamed(t *testing.T, src Source, name string) int64 {
	if strings.HasPrefix(name, "#") {
		return int64(name[1] - '0')
	}
	f, ok := src.(*Folder)
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
	for spec, want := range map[string]string{
		"folder:testdata/formats/folder?szie=8x6":     `unknown option "szie"`,
		"folder:testdata/formats/folder?size=8by6":    "size=8by6",
		"folder:testdata/formats/folder?resize=bilin": "the only resize is bilinear",
		"tar:x.tar?layout=zip":                        "no such file",
		"arrow:testdata/formats/folder":               "no *.arrow file",
		"parquet:":                                    "no path given",
		"folder:testdata/formats/folder?maxpixels=-1": "maxpixels=-1",
	} {
		_, err := Open(spec)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%q): %v, want an error containing %q", spec, err, want)
		}
	}
}
