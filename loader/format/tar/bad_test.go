package tar

import (
	"testing"

	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/imagedec"
	"github.com/loaderd/loaderd/loader/internal/loadertest"
)

// TestBadInputs maps each malformed tar fixture in testdata/formats/bad to
// its error: the sentinel, and the shard (and member) the *RecordError
// names.
func TestBadInputs(t *testing.T) {
	const bad = fixtures + "bad/"
	loadertest.CheckBadInputs(t, []loadertest.BadInput{
		{Spec: "tar:" + bad + "lying-big.tar", Want: loader.ErrCorrupt, File: "lying-big.tar"},
		{Spec: "tar:" + bad + "lying-huge.tar", Want: loader.ErrTruncated, File: "lying-huge.tar"},
		{Spec: "tar:" + bad + "lying-small.tar", Want: loader.ErrCorrupt, File: "lying-small.tar"},
		{Spec: "tar:" + bad + "lying-zeros.tar", Want: loader.ErrCorrupt, File: "lying-zeros.tar"},
		{Spec: "tar:" + bad + "ext.tar", Want: imagedec.ErrExtension, File: "ext.tar(train/a/notes.txt)"},
		{Spec: "tar:" + bad + "wds-nolabel.tar", Want: loader.ErrLabel, File: "wds-nolabel.tar(s1.png)"},
		{Spec: "tar:" + bad + "wds-badlabel.tar", Want: loader.ErrLabel, File: "wds-badlabel.tar(s0.cls)"},
		{Spec: "tar:" + bad + "nothing-*.tar", File: "nothing-*.tar"},
	}, nil)
}

// TestFormatOptions: options are checked before the files are.
func TestFormatOptions(t *testing.T) {
	loadertest.CheckOpenErrors(t, map[string]string{
		"tar:x.tar?layout=zip": "no such file",
		"tar:x.tar?szie=8x6":   `unknown option "szie"`,
	})
}

// TestOpenErrorIsNilSource: a failed Open returns a nil interface.
func TestOpenErrorIsNilSource(t *testing.T) {
	if src, err := loader.Open("tar:" + fixtures + "nope.tar"); err == nil || src != nil {
		t.Errorf("Open = %v, %v; want nil and an error", src, err)
	}
}
