package arrow

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loaderd/loaderd/loader"
	_ "github.com/loaderd/loaderd/loader/format/tar" // the same JPEGs as a tar, to compare with
	"github.com/loaderd/loaderd/loader/imagedec"
	"github.com/loaderd/loaderd/loader/internal/loadertest"
)

// writeIPC writes an Arrow IPC file of the given record batches.
func writeIPC(t testing.TB, path string, schema *arrow.Schema, batches ...[]arrow.Array) {
	t.Helper()
	var buf bytes.Buffer
	w, err := ipc.NewFileWriter(&buf, ipc.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	for _, cols := range batches {
		rec := array.NewRecordBatch(schema, cols, int64(cols[0].Len()))
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// imageArray builds an image column of rows [lo, hi) of imgs, as typ
// (binary, large_binary or Hugging Face's struct<bytes, path>); rows in
// null are null.
func imageArray(typ string, imgs [][]byte, lo, hi int, null map[int]bool) arrow.Array {
	mem := memory.NewGoAllocator()
	switch typ {
	case "binary", "large_binary":
		dt := arrow.BinaryTypes.Binary
		if typ == "large_binary" {
			dt = arrow.BinaryTypes.LargeBinary
		}
		b := array.NewBinaryBuilder(mem, dt)
		for i := lo; i < hi; i++ {
			if null[i] {
				b.AppendNull()
			} else {
				b.Append(imgs[i])
			}
		}
		return b.NewArray()
	}
	b := array.NewStructBuilder(mem, hfImage)
	for i := lo; i < hi; i++ {
		if null[i] {
			b.AppendNull()
			continue
		}
		b.Append(true)
		b.FieldBuilder(0).(*array.BinaryBuilder).Append(imgs[i])
		b.FieldBuilder(1).(*array.StringBuilder).Append(fmt.Sprintf("%02d.jpg", i))
	}
	return b.NewArray()
}

var hfImage = arrow.StructOf(arrow.Field{Name: "bytes", Type: arrow.BinaryTypes.Binary, Nullable: true},
	arrow.Field{Name: "path", Type: arrow.BinaryTypes.String, Nullable: true})

// writeEncoded writes imgs as an Arrow file with an image column of typ
// named col and int64 labels, in two record batches.
func writeEncoded(t testing.TB, path, col, typ string, imgs [][]byte, null map[int]bool, md *arrow.Metadata) {
	t.Helper()
	dt := map[string]arrow.DataType{"binary": arrow.BinaryTypes.Binary, "large_binary": arrow.BinaryTypes.LargeBinary, "struct": hfImage}[typ]
	schema := arrow.NewSchema([]arrow.Field{{Name: col, Type: dt, Nullable: true}, {Name: "label", Type: arrow.PrimitiveTypes.Int64}}, md)
	var batches [][]arrow.Array
	for _, r := range [][2]int{{0, 4}, {4, len(imgs)}} {
		lb := array.NewInt64Builder(memory.NewGoAllocator())
		for i := r[0]; i < r[1]; i++ {
			lb.Append(int64(loadertest.VaryingSet[i].Label))
		}
		batches = append(batches, []arrow.Array{imageArray(typ, imgs, r[0], r[1], null), lb.NewArray()})
	}
	writeIPC(t, path, schema, batches...)
}

// askScale asks the decoder for a fixed DCT scale.
type askScale int

func (s askScale) Want(h, w int) loader.Want { return loader.Want{Scale: int(s)} }

// TestArrowEncodedSized: an Arrow file of JPEGs of varying sizes, in each
// image column type, opens with size=any as a loader.SizedSource that
// reads exactly what the tar format reads from the same JPEGs: labels,
// sizes, DCT scales, pixels, and the batches of a resizing stream.
func TestArrowEncodedSized(t *testing.T) {
	imgs := loadertest.VaryingJPEGs(t)
	dir := t.TempDir()
	loadertest.WriteVaryingTar(t, filepath.Join(dir, "v.tar"), imgs)
	backends := []string{"go"}
	if imagedec.TurboAvailable() == nil {
		backends = append(backends, "turbo")
	}
	for _, typ := range []string{"binary", "large_binary", "struct"} {
		for _, be := range backends {
			t.Run(typ+"/"+be, func(t *testing.T) {
				path := filepath.Join(dir, typ+".arrow")
				col := map[string]string{"binary": "image", "large_binary": "pixels", "struct": "img"}[typ]
				writeEncoded(t, path, col, typ, imgs, nil, nil)
				opts := "?size=any&maxpixels=100000&decoder=" + be
				src, err := loader.Open("arrow:" + path + opts)
				if err != nil {
					t.Fatal(err)
				}
				defer src.Close()
				ref, err := loader.Open("tar:" + filepath.Join(dir, "v.tar") + opts)
				if err != nil {
					t.Fatal(err)
				}
				defer ref.Close()
				ss, ok := src.(loader.SizedSource)
				if !ok || src.Spec() != ref.Spec() || src.Len() != int64(len(imgs)) || ss.MaxPixels() != 100000 ||
					!slices.Equal(src.Classes(), []string{"0", "1", "2"}) {
					t.Fatalf("%T: spec %v, %d rows, classes %v", src, src.Spec(), src.Len(), src.Classes())
				}
				a, b := make([]byte, 100000*3), make([]byte, 100000*3)
				for i := range src.Len() {
					for _, d := range []int{1, 2} {
						l1, p1, x1, err1 := ss.SampleSized(i, a, askScale(d))
						l2, p2, x2, err2 := ref.(loader.SizedSource).SampleSized(i, b, askScale(d))
						h1, w1, d1, h2, w2, d2 := x1.H, x1.W, x1.Scale, x2.H, x2.W, x2.Scale
						if err1 != nil || err2 != nil || l1 != l2 || h1 != h2 || w1 != w2 || d1 != d2 || !bytes.Equal(p1, p2) {
							t.Fatalf("row %d at 1/%d: arrow %d %dx%d/%d %v, tar %d %dx%d/%d %v", i, d, l1, w1, h1, d1, err1, l2, w2, h2, d2, err2)
						}
						if h1 != loadertest.VaryingSet[i].H || w1 != loadertest.VaryingSet[i].W || l1 != loadertest.VaryingSet[i].Label {
							t.Fatalf("row %d: %d %dx%d, want %+v", i, l1, w1, h1, loadertest.VaryingSet[i])
						}
					}
					if n := src.(loader.Namer).Name(i); n != fmt.Sprintf("%s#%d", path, i) {
						t.Errorf("Name(%d) = %s", i, n)
					}
				}
				if !bytes.Equal(loadertest.StreamResized(t, src), loadertest.StreamResized(t, ref)) {
					t.Fatal("a resizing stream of the Arrow file and of the tar differ")
				}
			})
		}
	}
}

// TestArrowEncodedFixed: with size=WxH an encoded file has one size, as
// the tar format, and an image of another size is an error that names
// size=any; without size= images that differ imply size=any;
// resize=bilinear stretches the others.
func TestArrowEncodedFixed(t *testing.T) {
	imgs := loadertest.VaryingJPEGs(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "v.arrow")
	writeEncoded(t, path, "image", "binary", imgs, nil, nil)
	loadertest.WriteVaryingTar(t, filepath.Join(dir, "v.tar"), imgs)
	src, err := loader.Open("arrow:" + path + "?size=48x64&decoder=go")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if s := src.Spec(); s.H != 64 || s.W != 48 {
		t.Fatalf("spec %v, want size=48x64", s)
	}
	if _, _, err := src.Sample(1, make([]byte, src.Spec().Bytes())); !errors.Is(err, imagedec.ErrSize) || !strings.Contains(err.Error(), "?size=any") {
		t.Errorf("an image of another size: %v, want ErrSize naming ?size=any", err)
	}
	implied, err := loader.Open("arrow:" + path + "?decoder=go")
	if err != nil {
		t.Fatal(err)
	}
	defer implied.Close()
	if s := implied.Spec(); s.H != 0 || s.W != 0 || !loader.Caps(implied).Has(loader.CapSized) {
		t.Errorf("without size=: spec %v, caps %v, want images of varying size (size=any implied)", s, loader.Caps(implied))
	}
	src2, err := loader.Open("arrow:" + path + "?size=16x12&resize=bilinear&decoder=go")
	if err != nil {
		t.Fatal(err)
	}
	defer src2.Close()
	ref, err := loader.Open("tar:" + filepath.Join(dir, "v.tar") + "?size=16x12&resize=bilinear&decoder=go")
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	for i := range src2.Len() {
		l1, p1, err1 := src2.Sample(i, make([]byte, 16*12*3))
		l2, p2, err2 := ref.Sample(i, make([]byte, 16*12*3))
		if err1 != nil || err2 != nil || l1 != l2 || !bytes.Equal(p1, p2) {
			t.Fatalf("row %d: %v, %v or the pixels differ", i, err1, err2)
		}
	}
}

// TestArrowEncodedErrors: a null image, a large one, classes from the
// metadata; and size=any or the decode options on a raw-pixel file are
// refused, saying why.
func TestArrowEncodedErrors(t *testing.T) {
	imgs := loadertest.VaryingJPEGs(t)
	path := filepath.Join(t.TempDir(), "v.arrow")
	md := arrow.NewMetadata([]string{MetaClasses}, []string{`["cat","dog","emu"]`})
	writeEncoded(t, path, "img", "struct", imgs, map[int]bool{5: true}, &md)
	if len(imgs[1]) <= len(imgs[6]) {
		t.Fatalf("image 1 has %d bytes, image 6 %d", len(imgs[1]), len(imgs[6]))
	}
	src, err := loader.Open(fmt.Sprintf("arrow:%s?size=any&maxbytes=%d", path, len(imgs[6])))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if !slices.Equal(src.Classes(), []string{"cat", "dog", "emu"}) {
		t.Errorf("classes %v", src.Classes())
	}
	scratch := make([]byte, src.(loader.SizedSource).MaxPixels()*3)
	var re *loader.RecordError
	if _, _, err := src.Sample(5, scratch); !errors.Is(err, loader.ErrCorrupt) || !errors.As(err, &re) || re.Record != 5 || re.File != path {
		t.Errorf("null image: %v, want ErrCorrupt naming %s record 5", err, path)
	}
	if _, _, err := src.Sample(1, scratch); !errors.Is(err, imagedec.ErrTooLarge) {
		t.Errorf("a %d-byte image over maxbytes=%d: %v", len(imgs[1]), len(imgs[6]), err)
	}
	if _, _, err := src.Sample(6, scratch); err != nil {
		t.Errorf("row 6: %v", err)
	}
	for spec, want := range map[string]string{
		"arrow:" + fixtures + "bad/label.arrow?size=any":      "size=any applies to encoded images, and column \"pixels\" holds raw pixels of one size",
		"arrow:" + fixtures + "bad/label.arrow?maxpixels=100": "maxpixels= applies to encoded images",
		"arrow:" + path + "?size=any&resize=bilinear":         "resize=bilinear needs a size",
		"arrow:" + path + "?pixels=img&image=img":             "give one",
		"arrow:" + path + "?image=nope":                       `want one "nope" and one "label" column`,
	} {
		src, err := loader.Open(spec)
		if err == nil {
			src.Close()
			t.Errorf("%s opened", spec)
		} else if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", spec, err, want)
		}
	}
}

// FuzzArrowEncodedIndex: any bytes give an index of encoded images or an
// error wrapping a sentinel, never a panic; every row's bytes lie inside
// the file.
func FuzzArrowEncodedIndex(f *testing.F) {
	imgs := loadertest.VaryingJPEGs(f)
	path := filepath.Join(f.TempDir(), "v.arrow")
	writeEncoded(f, path, "image", "struct", imgs[:5], map[int]bool{2: true}, nil)
	seed, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Fuzz(func(t *testing.T, data []byte) {
		a := &encSource{mapped: mapped{files: []arrowFile{{path: "fuzz", data: data}}}}
		if err := a.index(0, "image", "label"); err != nil {
			if !errors.Is(err, loader.ErrCorrupt) && !errors.Is(err, loader.ErrTruncated) && !errors.Is(err, loader.ErrColumn) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		n := int64(0)
		for _, b := range a.batches {
			for j := range b.n {
				if v := b.values[b.offs[j]:b.offs[j+1]]; len(v) > 0 && !Inside(v, data) {
					t.Fatalf("row %d lies outside the file", j)
				}
			}
			n += b.n
		}
		if n != int64(len(a.labels)) {
			t.Fatalf("%d rows, %d labels", n, len(a.labels))
		}
	})
}
