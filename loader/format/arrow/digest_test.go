package arrow

import (
	"path/filepath"
	"testing"

	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/internal/loadertest"
)

// TestArrowEncodedFingerprint: a copy of a file of encoded images
// fingerprints the same; a null image, or one a byte longer, does not.
func TestArrowEncodedFingerprint(t *testing.T) {
	imgs := loadertest.VaryingJPEGs(t)
	longer := append([][]byte(nil), imgs...)
	longer[2] = append(append([]byte(nil), imgs[2]...), 0)
	base := func(dir string) string {
		writeEncoded(t, filepath.Join(dir, "v.arrow"), "image", "binary", imgs, nil, nil)
		return dir
	}
	for _, c := range []struct {
		name  string
		write func(dir string) string
		same  bool
	}{
		{"copy", base, true},
		{"a null image", func(dir string) string {
			writeEncoded(t, filepath.Join(dir, "v.arrow"), "image", "binary", imgs, map[int]bool{2: true}, nil)
			return dir
		}, false},
		{"an image a byte longer", func(dir string) string {
			writeEncoded(t, filepath.Join(dir, "v.arrow"), "image", "binary", longer, nil, nil)
			return dir
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := fingerprint(t, base(t.TempDir())), fingerprint(t, c.write(t.TempDir()))
			if (a == b) != c.same {
				t.Errorf("fingerprints %s and %s: equal %v, want %v", a, b, a == b, c.same)
			}
		})
	}
}

func fingerprint(t *testing.T, dir string) string {
	t.Helper()
	src, err := loader.Open("arrow:" + dir + "?size=any&decoder=go")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	fp, err := loader.Fingerprint(src)
	if err != nil {
		t.Fatal(err)
	}
	return fp
}
