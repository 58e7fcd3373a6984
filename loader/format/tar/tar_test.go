package tar

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/loaderd/loaderd/loader"
	_ "github.com/loaderd/loaderd/loader/format/folder" // what the tar layout must match
	"github.com/loaderd/loaderd/loader/imagedec"
	"github.com/loaderd/loaderd/loader/internal/loadertest"
)

// The fixtures are shared with the other formats' tests.
const fixtures = "../../testdata/formats/"

// entry is one entry of a test archive; a name ending in "/" is a
// directory, link a symlink target.
type entry struct {
	name string
	data []byte
	link string
}

func writeTar(t testing.TB, path string, ms ...entry) {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, m := range ms {
		h := &tar.Header{Name: m.name, Mode: 0o644, Size: int64(len(m.data)), Typeflag: tar.TypeReg}
		switch {
		case m.link != "":
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, m.link, 0
		case m.name[len(m.name)-1] == '/':
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write(m.data)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestTarMatchesFolder: the fixture folder packed into two shards, with
// directories, a symlink and hidden files thrown in, reads exactly as the
// folder does, whatever the member order and however root is found.
func TestTarMatchesFolder(t *testing.T) {
	fol, err := loader.Open("folder:" + fixtures + "folder")
	if err != nil {
		t.Fatal(err)
	}
	wantLabels, wantPix := loadertest.Samples(t, fol)
	dir := t.TempDir()
	img := func(p string) []byte { return loadertest.Fixture(t, "folder/"+p) }
	writeTar(t, filepath.Join(dir, "shard-1.tar"),
		entry{name: "data/"}, entry{name: "data/cat/"},
		entry{name: "data/cat/sub/3.bmp", data: img("cat/sub/3.bmp")},
		entry{name: "data/bird/1.jpg", data: img("bird/1.jpg")},
		entry{name: "data/bird/._1.jpg", data: []byte("macOS resource fork")},
		entry{name: "data/cat/latest.gif", link: "2.gif"})
	writeTar(t, filepath.Join(dir, "shard-2.tar"),
		entry{name: "data/cat/4.TIFF", data: img("cat/4.TIFF")},
		entry{name: "data/cat/2.gif", data: img("cat/2.gif")},
		entry{name: "data/bird/0.png", data: img("bird/0.png")})
	for _, spec := range []string{"tar:" + dir, "tar:" + dir + "/shard-[0-9].tar?root=data", "tar:" + dir + "?layout=folder"} {
		ts, err := loader.Open(spec)
		if err != nil {
			t.Fatal(err)
		}
		labels, pix := loadertest.Samples(t, ts)
		if !slices.Equal(ts.Classes(), fol.Classes()) || !slices.Equal(labels, wantLabels) || ts.Spec() != fol.Spec() {
			t.Fatalf("%s: classes %v labels %v spec %v; folder: %v %v %v", spec, ts.Classes(), labels, ts.Spec(), fol.Classes(), wantLabels, fol.Spec())
		}
		for i := range pix {
			if !bytes.Equal(pix[i], wantPix[i]) {
				t.Fatalf("%s: sample %d (%s) differs from %s", spec, i, ts.(*source).Name(int64(i)), pathOf(fol, int64(i)))
			}
		}
		ts.Close()
	}
	// With the root above data/, there is a single class.
	ts, err := open(dir + "?root=/")
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	if !slices.Equal(ts.Classes(), []string{"data"}) {
		t.Fatalf("root=/: classes %v, want [data]", ts.Classes())
	}
}

// TestTarWebDataset: KEY.EXT + KEY.cls over two shards, extra fields
// ignored, samples in shard and member order.
func TestTarWebDataset(t *testing.T) {
	dir := t.TempDir()
	png, jpg := loadertest.Fixture(t, "img/rgb.png"), loadertest.Fixture(t, "img/rgb.jpg")
	writeTar(t, filepath.Join(dir, "a.tar"),
		entry{name: "k0.jpg", data: jpg}, entry{name: "k0.cls", data: []byte("2\n")},
		entry{name: "k1.cls", data: []byte(" 0")}, entry{name: "k1.png", data: png},
		entry{name: "k1.json", data: []byte(`{"caption": "ignored"}`)})
	writeTar(t, filepath.Join(dir, "b.tar"),
		entry{name: "sub/k0.seg.png", data: png}, entry{name: "sub/k0.cls", data: []byte("1")})
	ts, err := open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	labels, pix := loadertest.Samples(t, ts)
	if !slices.Equal(labels, []int32{2, 0, 1}) || !slices.Equal(ts.Classes(), []string{"0", "1", "2"}) {
		t.Fatalf("labels %v classes %v, want [2 0 1] [0 1 2]", labels, ts.Classes())
	}
	be, _ := imagedec.ChooseBackend("") // the source's, decoder= absent
	d := &imagedec.Decoder{H: 6, W: 8, Backend: be}
	for i, data := range [][]byte{jpg, png, png} {
		want := make([]byte, 6*8*3)
		if err := d.Decode(data, want); err != nil || !bytes.Equal(pix[i], want) {
			t.Fatalf("sample %d (%s) differs from its image (%v)", i, ts.Name(int64(i)), err)
		}
	}
	// image= picks one of two image fields.
	writeTar(t, filepath.Join(dir, "c.tar"),
		entry{name: "k.jpg", data: jpg}, entry{name: "k.png", data: png}, entry{name: "k.cls", data: []byte("0")})
	if _, err := open(filepath.Join(dir, "c.tar")); !errors.Is(err, loader.ErrCorrupt) {
		t.Fatalf("two image fields: %v, want ErrCorrupt", err)
	}
	tc, err := open(filepath.Join(dir, "c.tar") + "?image=png")
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	if tc.Len() != 1 || tc.Name(0) != filepath.Join(dir, "c.tar")+"(k.png)" {
		t.Fatalf("image=png: %d samples, first %s", tc.Len(), tc.Name(0))
	}
}

// TestTarSampleAllocs: reading a JPEG member allocates nothing: a Sample
// allocates no more than decoding the member's bytes alone does.
func TestTarSampleAllocs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.tar")
	gray := loadertest.Fixture(t, "img/gray.jpg")
	writeTar(t, path, entry{name: "a/0.jpg", data: loadertest.Fixture(t, "img/rgb.jpg")}, entry{name: "b/1.jpg", data: gray})
	// The Go decoder: through tar under the full CI run the turbo path
	// measured 1-2 allocations per sample that never showed alone, on any
	// run here; imagedec's TestTurboAllocs holds turbo decoding itself to 0.
	// The Go decoder is image/jpeg, which allocates its state and the image
	// for every image (imagedec's TestDecodeAllocs bounds that): what tar
	// adds on top of it must be nothing.
	ts, err := open(path + "?decoder=go")
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	scratch := make([]byte, ts.Spec().Bytes())
	ts.Sample(0, scratch)
	pool := imagedec.NewPool(ts.Spec().H, ts.Spec().W, imagedec.DefaultMaxPixels, false) // the source's decoders
	if _, err := pool.Decode(gray, scratch); err != nil {
		t.Fatal(err)
	}
	dec := allocsPerRun(100, func() { pool.Decode(gray, scratch) })
	if n := allocsPerRun(100, func() { ts.Sample(1, scratch) }); n > dec {
		t.Fatalf("%v allocations per Sample, %v of them the decoder's: want none but the decoder's", n, dec)
	}
}

// FuzzTarIndex: any bytes give an index or an error wrapping ErrCorrupt or
// ErrTruncated, never a panic; an index lists members inside the archive,
// in order, not overlapping.
func FuzzTarIndex(f *testing.F) {
	names, _ := filepath.Glob(fixtures + "bad/*.tar")
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for i, name := range []string{"a/0.png", "a/1.png", "b/" + string(make([]byte, 120)) + "long.png"} {
		tw.WriteHeader(&tar.Header{Name: name, Size: int64(i * 700), Mode: 0o644, Format: tar.FormatPAX})
		tw.Write(make([]byte, i*700))
	}
	tw.Close()
	f.Add(b.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		ms, err := indexTar(bytes.NewReader(data), int64(len(data)), false)
		if err != nil {
			if !errors.Is(err, loader.ErrCorrupt) && !errors.Is(err, loader.ErrTruncated) {
				t.Fatalf("error wraps neither ErrCorrupt nor ErrTruncated: %v", err)
			}
			return
		}
		end := int64(0)
		for _, m := range ms {
			if m.off < end || m.size < 0 || m.off+m.size > int64(len(data)) {
				t.Fatalf("member %q at %d+%d: outside the archive (%d) or before the previous end %d", m.name, m.off, m.size, len(data), end)
			}
			end = m.off + m.size
		}
	})
}

// loader.Open names a format and a path; options follow a '?'.
func Example() {
	src, err := loader.Open("tar:../../testdata/formats/bad/ext.tar")
	fmt.Println(src, err)
	src, err = loader.Open("folder:../../testdata/formats/folder?size=8x6")
	if err != nil {
		panic(err)
	}
	defer src.Close()
	fmt.Println(src, src.Len(), src.Classes(), src.Spec())
	// Output:
	// <nil> loader: ../../testdata/formats/bad/ext.tar(train/a/notes.txt): unknown image extension ".txt"
	// folder:../../testdata/formats/folder 5 [bird cat] hwc[6 8 3]/u8
}

// pathOf is the folder source's path of sample i.
func pathOf(src loader.Source, i int64) string {
	return src.(interface{ Path(int64) string }).Path(i)
}
