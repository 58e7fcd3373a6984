package all_test

import (
	"archive/tar"
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loaderd/loaderd/internal/convert"
	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/cache"
	"github.com/loaderd/loaderd/loader/format/synthetic"
)

// member is one file of a fixture: a tar member, or a file under a
// folder's root.
type member struct {
	name string
	data []byte
}

// pngOf is a 4×4 PNG of one colour.
func pngOf(t testing.TB, v uint8) []byte {
	t.Helper()
	m := image.NewNRGBA(image.Rect(0, 0, 4, 4))
	for i := range 16 {
		m.Set(i%4, i/4, color.NRGBA{v, v / 2, 255 - v, 255})
	}
	var b bytes.Buffer
	if err := png.Encode(&b, m); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// images is the base fixture: two classes of two images, changed by
// edits (each may rewrite a member's name or data).
func images(t testing.TB, edits ...func(*member)) []member {
	ms := []member{{"cat/1.png", pngOf(t, 10)}, {"cat/2.png", pngOf(t, 60)}, {"dog/1.png", pngOf(t, 110)}, {"dog/2.png", pngOf(t, 160)}}
	for i := range ms {
		for _, e := range edits {
			e(&ms[i])
		}
	}
	return ms
}

// The edits of images.
var (
	grow      = func(m *member) { m.data = grow1(m) }
	rename    = func(m *member) { m.name = strings.Replace(m.name, "dog/2.", "dog/3.", 1) }
	renameDog = func(m *member) { m.name = strings.Replace(m.name, "dog/", "wolf/", 1) }
)

// grow1 appends a byte to dog/2.png's data, which decoders ignore.
func grow1(m *member) []byte {
	if m.name != "dog/2.png" {
		return m.data
	}
	return append(bytes.Clone(m.data), 0)
}

func writeTar(t testing.TB, path string, ms []member) {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, m := range ms {
		if err := tw.WriteHeader(&tar.Header{Name: m.name, Mode: 0o644, Size: int64(len(m.data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write(m.data)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, b.Bytes())
}

func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// fixture writes a dataset under dir and returns its FORMAT:PATH.
type fixture func(t *testing.T, dir string) string

func tarOf(opts string, edits ...func(*member)) fixture {
	return func(t *testing.T, dir string) string {
		writeTar(t, filepath.Join(dir, "train-0.tar"), images(t, edits...))
		return "tar:" + filepath.Join(dir, "train-0.tar") + opts
	}
}

func folderOf(edits ...func(*member)) fixture {
	return func(t *testing.T, dir string) string {
		for _, m := range images(t, edits...) {
			writeFile(t, filepath.Join(dir, "root", m.name), m.data)
		}
		return "folder:" + filepath.Join(dir, "root")
	}
}

// webdataset is a WebDataset shard of the images of images, labelled by
// labels.
func webdataset(labels ...int) fixture {
	return func(t *testing.T, dir string) string {
		var ms []member
		for i, m := range images(t) {
			key := fmt.Sprintf("%04d", i)
			ms = append(ms, member{key + ".png", m.data}, member{key + ".cls", []byte(fmt.Sprint(labels[i]))})
		}
		writeTar(t, filepath.Join(dir, "wds.tar"), ms)
		return "tar:" + filepath.Join(dir, "wds.tar")
	}
}

// cifarOf copies the CIFAR-10 fixture, its byte at off xor-ed with flip.
func cifarOf(off int, flip byte) fixture {
	return func(t *testing.T, dir string) string {
		for _, name := range []string{"data_batch_1.bin", "data_batch_2.bin", "batches.meta.txt"} {
			data, err := os.ReadFile(filepath.Join("../../testdata/cifar10", name))
			if err != nil {
				t.Fatal(err)
			}
			if name == "data_batch_2.bin" {
				data[off] ^= flip
			}
			writeFile(t, filepath.Join(dir, "cifar", name), data)
		}
		return "cifar:" + filepath.Join(dir, "cifar")
	}
}

// arrowOf converts synthetic:N to raw-pixel Arrow.
func arrowOf(n int64) fixture {
	return func(t *testing.T, dir string) string {
		syn := synthetic.New(n, 0)
		var b bytes.Buffer
		w, err := convert.NewArrowWriter(&b, syn.Spec(), syn.Classes(), 8)
		if err != nil {
			t.Fatal(err)
		}
		scratch := make([]byte, syn.Spec().Bytes())
		for i := range n {
			l, p, _ := syn.Sample(i, scratch)
			if err := w.Write(l, p); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "a", "part-0.arrow"), b.Bytes())
		return "arrow:" + filepath.Join(dir, "a")
	}
}

// parquetOf writes the images of images as a Parquet file.
func parquetOf(edits ...func(*member)) fixture {
	return func(t *testing.T, dir string) string {
		var b bytes.Buffer
		w, err := convert.NewParquetWriter(&b, "img", "label", []string{"cat", "dog"}, 2)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range images(t, edits...) {
			if err := w.Write(m.data, m.name, int64(i/2)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "p", "train.parquet"), b.Bytes())
		return "parquet:" + filepath.Join(dir, "p")
	}
}

func spec(s string) fixture { return func(*testing.T, string) string { return s } }

// TestFingerprintFormats: the same bytes in two directories fingerprint
// the same, in every format; what changes the samples served changes it.
func TestFingerprintFormats(t *testing.T) {
	for _, c := range []struct {
		name string
		a, b fixture
		same bool
	}{
		{"tar/copy", tarOf(""), tarOf(""), true},
		{"tar/a member one byte longer", tarOf(""), tarOf("", grow), false},
		{"tar/a member renamed", tarOf(""), tarOf("", rename), false},
		{"tar/a class renamed", tarOf(""), tarOf("", renameDog), false},
		{"tar/resize=", tarOf("?size=4x4"), tarOf("?size=4x4&resize=bilinear"), false},
		{"tar/decoded cache", tarOf(""), tarOf("?cache=decoded"), true},
		{"tar/holdout part", tarOf("?holdout=1&part=train"), tarOf("?holdout=1&part=val"), false},
		{"tar/holdout and none", tarOf(""), tarOf("?holdout=1"), false},
		{"tar/holdout copy", tarOf("?holdout=1&part=val"), tarOf("?holdout=1&part=val"), true},
		{"webdataset/copy", webdataset(0, 1, 0, 1), webdataset(0, 1, 0, 1), true},
		{"webdataset/a label changed", webdataset(0, 1, 0, 1), webdataset(0, 1, 1, 1), false},
		{"folder/copy", folderOf(), folderOf(), true},
		{"folder/a file one byte longer", folderOf(), folderOf(grow), false},
		{"folder/a file renamed", folderOf(), folderOf(rename), false},
		{"folder/a class renamed", folderOf(), folderOf(renameDog), false},
		{"cifar/copy", cifarOf(0, 0), cifarOf(0, 0), true},
		{"cifar/a pixel changed", cifarOf(100, 1), cifarOf(100, 0), false},
		{"cifar/a label changed", cifarOf(3073, 1), cifarOf(3073, 0), false},
		{"synthetic/same", spec("synthetic:100"), spec("synthetic:100?seed=0"), true},
		{"synthetic/seed", spec("synthetic:100"), spec("synthetic:100?seed=1"), false},
		{"arrow/copy", arrowOf(20), arrowOf(20), true},
		{"arrow/a row more", arrowOf(20), arrowOf(21), false},
		{"parquet/copy", parquetOf(), parquetOf(), true},
		{"parquet/an image one byte longer", parquetOf(), parquetOf(grow), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := open(t, c.a(t, t.TempDir())), open(t, c.b(t, t.TempDir()))
			if (a == b) != c.same {
				t.Errorf("fingerprints %s and %s: equal %v, want %v", a, b, a == b, c.same)
			}
		})
	}
}

// open opens spec as the daemon does (cache.Open) and fingerprints it.
func open(t *testing.T, spec string) string {
	t.Helper()
	src, err := cache.Open(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, ok := loader.As[loader.Digester](src); !ok {
		t.Errorf("%s is no Digester", spec)
	}
	fp, err := loader.Fingerprint(src)
	if err != nil {
		t.Fatal(err)
	}
	return fp
}
