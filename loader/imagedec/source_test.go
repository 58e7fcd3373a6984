package imagedec

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"testing"

	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/internal/loadertest"
	"github.com/loaderd/loaderd/sampler"
)

// memRecords is a format held in memory, for the tests of Source: record
// i is imgs[i] (nil: a null cell) labelled labels[i]; with rows, the
// records are rows of one file ("mem.tbl", record i), else files of
// their own ("mem/NN.jpg"). It counts its reads and the holds it gave
// out that are not released yet.
type memRecords struct {
	imgs     [][]byte
	labels   []int32
	rows     bool
	sizeless bool // SizeOf says -1, as a folder's
	closed   bool
	reads    int
	held     int
}

func (m *memRecords) Len() int64            { return int64(len(m.imgs)) }
func (m *memRecords) Classes() []string     { return []string{"a", "b"} }
func (m *memRecords) LabelOf(i int64) int32 { return m.labels[i] }
func (m *memRecords) Close() error          { m.closed = true; return nil }
func (m *memRecords) Release()              { m.held-- }

func (m *memRecords) Where(i int64) (string, int64) {
	if m.rows {
		return "mem.tbl", i
	}
	return fmt.Sprintf("mem/%02d.jpg", i), -1
}

func (m *memRecords) SizeOf(i int64) int64 {
	if m.sizeless {
		return -1
	}
	return int64(len(m.imgs[i]))
}

func (m *memRecords) Encoded(i int64) ([]byte, Hold, error) {
	m.reads++
	switch {
	case m.closed:
		return nil, nil, loader.ErrClosed
	case m.imgs[i] == nil:
		return nil, nil, ErrNull
	}
	m.held++
	return m.imgs[i], m, nil
}

// sharded is a format that adds a shard order and prefetching to its
// Source, as tar does.
type sharded struct {
	*Source
	*memRecords
}

func (s sharded) Len() int64                  { return s.memRecords.Len() }
func (s sharded) Classes() []string           { return s.memRecords.Classes() }
func (s sharded) Close() error                { return s.memRecords.Close() }
func (s sharded) ShardOrder() *sampler.Shards { return nil }
func (s sharded) Prefetch([]int64)            {}

// bigJPEG is a w×h JPEG of a gradient, large enough for decode-and-crop.
func bigJPEG(t *testing.T, w, h int) []byte {
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			m.Set(x, y, color.RGBA{uint8(x), uint8(y), uint8(x ^ y), 255})
		}
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, m, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func backends() []Backend {
	if TurboAvailable() == nil {
		return []Backend{GoJPEG, TurboJPEG}
	}
	return []Backend{GoJPEG}
}

// TestSourceErrors: every error about a record is a *loader.RecordError
// naming its file and record (or the dataset and index), with the
// format's sentinel; maxbytes= is checked before the record is read, and
// every hold is released, for Sample of fixed-size images and for
// SampleSized of size=any.
func TestSourceErrors(t *testing.T) {
	jpg := loadertest.Fixture(t, "img/rgb.jpg")
	cases := []struct {
		name   string
		img    []byte // record 1's image
		label  int32  // record 1's label
		rows   bool
		opt    Options
		i      int64
		closed bool
		want   error
		file   string
		record int64
		reads  int // Encoded calls
	}{
		{name: "index past the end", i: 2, want: loader.ErrIndex, file: "set", record: 2},
		{name: "negative index", i: -1, want: loader.ErrIndex, file: "set", record: -1},
		{name: "over maxbytes", opt: Options{MaxBytes: int64(len(jpg)) - 1}, i: 1, want: ErrTooLarge, file: "mem/01.jpg", record: -1},
		{name: "over maxbytes, a row", rows: true, opt: Options{MaxBytes: int64(len(jpg)) - 1}, i: 1, want: ErrTooLarge, file: "mem.tbl", record: 1},
		{name: "truncated", img: jpg[:len(jpg)/2], i: 1, want: loader.ErrTruncated, file: "mem/01.jpg", record: -1, reads: 1},
		{name: "truncated, a row", img: jpg[:len(jpg)/2], rows: true, i: 1, want: loader.ErrTruncated, file: "mem.tbl", record: 1, reads: 1},
		{name: "corrupt", img: loadertest.Fixture(t, "bad/images/c/corrupt.jpg"), i: 1, want: loader.ErrCorrupt, file: "mem/01.jpg", record: -1, reads: 1},
		{name: "not an image", img: []byte("GIF? no: text"), i: 1, want: ErrFormat, file: "mem/01.jpg", record: -1, reads: 1},
		{name: "bomb", img: loadertest.Fixture(t, "bad/images/c/bomb.jpg"), i: 1, want: ErrTooLarge, file: "mem/01.jpg", record: -1, reads: 1},
		{name: "null", img: []byte(nil), rows: true, i: 1, want: ErrNull, file: "mem.tbl", record: 1, reads: 1},
		{name: "label", label: 2, rows: true, i: 1, want: loader.ErrLabel, file: "mem.tbl", record: 1, reads: 1},
		{name: "closed", closed: true, i: 1, want: loader.ErrClosed, file: "set", record: 1, reads: 1},
	}
	for _, be := range backends() {
		for _, anySize := range []bool{false, true} {
			for _, c := range cases {
				t.Run(fmt.Sprintf("%v/any=%v/%s", be, anySize, c.name), func(t *testing.T) {
					img := c.img
					if img == nil && c.want != ErrNull {
						img = jpg
					}
					m := &memRecords{imgs: [][]byte{jpg, img}, labels: []int32{0, c.label}, rows: c.rows}
					opt := c.opt
					opt.Format, opt.Path, opt.H, opt.W, opt.AnySize, opt.Backend = "mem", "set", 6, 8, anySize, be
					s, err := NewSource(m, opt)
					if err != nil {
						t.Fatal(err)
					}
					m.closed = c.closed
					scratch := make([]byte, 8*6*3)
					if anySize {
						scratch = make([]byte, 3*s.MaxPixels())
					}
					_, _, err = s.Sample(c.i, scratch)
					var re *loader.RecordError
					if !errors.Is(err, c.want) || !errors.As(err, &re) || re.File != c.file || re.Record != c.record {
						t.Fatalf("Sample(%d): %v; want %v naming %s record %d", c.i, err, c.want, c.file, c.record)
					}
					if m.reads != c.reads || m.held != 0 {
						t.Fatalf("Sample(%d): %d reads, %d holds not released; want %d, 0", c.i, m.reads, m.held, c.reads)
					}
				})
			}
		}
	}
}

// TestSourceSampleSized: SampleSized decodes what was asked where it can
// and says what it decoded: the whole image at scale 1 without a want,
// the DCT scale asked for (TurboJPEG), the crop box alone when asked for
// one of a large JPEG (TurboJPEG with libjpeg.so.62), the whole image
// for a crop it does not take. The pixels are always the whole decode's,
// scaled or cropped as reported.
func TestSourceSampleSized(t *testing.T) {
	big, small := bigJPEG(t, 400, 300), loadertest.Fixture(t, "img/rgb.jpg")
	box := sample.Box{X: 37, Y: 21, W: 150, H: 111}
	cropping := TurboAvailable() == nil && CropAvailable() == nil
	cases := []struct {
		name string
		i    int64
		want loader.Scaler // nil: none
		// What a decoder that can (turbo) gives, and what Go's gives.
		turbo, gojpeg loader.Decoded
	}{
		{"no want", 0, nil, loader.WholeImage(300, 400, 1), loader.WholeImage(300, 400, 1)},
		{"scale 1", 0, ask{Scale: 1}, loader.WholeImage(300, 400, 1), loader.WholeImage(300, 400, 1)},
		{"scale 2", 0, ask{Scale: 2}, loader.WholeImage(300, 400, 2), loader.WholeImage(300, 400, 1)},
		{"scale 8", 0, ask{Scale: 8}, loader.WholeImage(300, 400, 8), loader.WholeImage(300, 400, 1)},
		{"scale 3 is no DCT scale", 0, ask{Scale: 3}, loader.WholeImage(300, 400, 1), loader.WholeImage(300, 400, 1)},
		{"crop", 0, ask{Scale: 1, Crop: box}, loader.Decoded{H: 300, W: 400, Scale: 1, Box: box}, loader.WholeImage(300, 400, 1)},
		{"crop and scale: the scale", 0, ask{Scale: 2, Crop: box}, loader.WholeImage(300, 400, 2), loader.WholeImage(300, 400, 1)},
		{"crop outside the image", 0, ask{Scale: 1, Crop: sample.Box{X: 300, Y: 200, W: 150, H: 111}}, loader.WholeImage(300, 400, 1), loader.WholeImage(300, 400, 1)},
		{"crop of a small image", 1, ask{Scale: 1, Crop: sample.Box{X: 1, Y: 1, W: 4, H: 3}}, loader.WholeImage(6, 8, 1), loader.WholeImage(6, 8, 1)},
	}
	for _, be := range backends() {
		m := &memRecords{imgs: [][]byte{big, small}, labels: []int32{1, 0}}
		s, err := NewSource(m, Options{Format: "mem", Path: "set", AnySize: true, MaxPixels: 400 * 300, Backend: be})
		if err != nil {
			t.Fatal(err)
		}
		ref := &Decoder{Backend: be, MaxPixels: 400 * 300}
		scratch, whole := make([]byte, 3*s.MaxPixels()), make([]byte, 3*s.MaxPixels())
		for _, c := range cases {
			wantDec := c.gojpeg
			if be == TurboJPEG && (cropping || c.turbo.Whole()) {
				wantDec = c.turbo
			}
			label, pix, dec, err := s.SampleSized(c.i, scratch, c.want)
			if err != nil || label != m.labels[c.i] || dec != wantDec || m.held != 0 {
				t.Fatalf("%v %s: label %d, %+v, %v, %d holds; want %d, %+v", be, c.name, label, dec, err, m.held, m.labels[c.i], wantDec)
			}
			// The reference: the same decoder's whole decode at the
			// reported scale, cut to the reported box.
			rd, err := ref.DecodeSized(m.imgs[c.i], whole, loader.Want{Scale: dec.Scale})
			if err != nil || !rd.Whole() || rd.Scale != dec.Scale {
				t.Fatalf("%v %s: reference %+v, %v", be, c.name, rd, err)
			}
			want := Pixels(whole, rd)
			if !dec.Whole() {
				bw, w := int(dec.Box.W)*3, dec.W*3
				var cut []byte
				for y := range int(dec.Box.H) {
					row := (int(dec.Box.Y)+y)*w + int(dec.Box.X)*3
					cut = append(cut, whole[row:row+bw]...)
				}
				want = cut
			}
			if !bytes.Equal(pix, want) {
				t.Fatalf("%v %s: %d bytes differ from the whole decode's %d as reported (%+v)", be, c.name, len(pix), len(want), dec)
			}
		}
		// Sample of size=any is the whole image at scale 1.
		if _, pix, err := s.Sample(0, scratch); err != nil || len(pix) != 400*300*3 {
			t.Fatalf("%v: Sample: %d bytes, %v", be, len(pix), err)
		}
	}
	if !cropping {
		t.Log("no crop was decoded alone here: TurboJPEG or libjpeg.so.62 is missing")
	}
}

// ask is a want of a fixed scale and crop.
type ask loader.Want

func (a ask) Want(h, w int) loader.Want { return loader.Want(a) }

// TestSourceFixed: without size=any, Sample decodes at the dataset's size,
// which without size= is the first image's that is not null; labels come
// without reading; names are the record's file, or FILE#RECORD.
func TestSourceFixed(t *testing.T) {
	rgb, gray := loadertest.Fixture(t, "img/rgb.jpg"), loadertest.Fixture(t, "img/gray.png")
	for _, c := range []struct {
		name  string
		rows  bool
		imgs  [][]byte
		names []string
		err   error
	}{
		{"files", false, [][]byte{rgb, gray}, []string{"mem/00.jpg", "mem/01.jpg"}, nil},
		{"rows, the first null", true, [][]byte{nil, gray, rgb}, []string{"mem.tbl#0", "mem.tbl#1", "mem.tbl#2"}, nil},
		{"rows, all null", true, [][]byte{nil, nil}, nil, loader.ErrCorrupt},
	} {
		m := &memRecords{imgs: c.imgs, labels: make([]int32, len(c.imgs)), rows: c.rows}
		m.labels[len(m.labels)-1] = 1
		s, err := NewSource(m, Options{Format: "mem", Path: "set"})
		if c.err != nil {
			var re *loader.RecordError
			if !errors.Is(err, c.err) || !errors.As(err, &re) || re.File != "set" || s != nil {
				t.Fatalf("%s: %v, want %v naming set", c.name, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if sp := s.Spec(); sp.H != 6 || sp.W != 8 || sp.C != 3 || s.String() != "mem:set" || s.Len() != int64(len(c.imgs)) {
			t.Fatalf("%s: spec %v, %s, %d records", c.name, sp, s, s.Len())
		}
		reads := m.reads
		for i := range s.Len() {
			if l, err := s.Label(i); err != nil || l != m.labels[i] || s.Name(i) != c.names[i] {
				t.Fatalf("%s: Label(%d) = %d, %v; Name %q, want %q", c.name, i, l, err, s.Name(i), c.names[i])
			}
		}
		if _, err := s.Label(s.Len()); !errors.Is(err, loader.ErrIndex) || m.reads != reads {
			t.Fatalf("%s: Label past the end: %v, after %d reads", c.name, err, m.reads-reads)
		}
		scratch := make([]byte, 8*6*3)
		for i, img := range c.imgs {
			if img == nil {
				continue
			}
			want := make([]byte, 8*6*3)
			if err := (&Decoder{H: 6, W: 8}).Decode(img, want); err != nil {
				t.Fatal(err)
			}
			l, pix, err := s.Sample(int64(i), scratch)
			if err != nil || l != m.labels[i] || !bytes.Equal(pix, want) || m.held != 0 {
				t.Fatalf("%s: Sample(%d) = %d, %v, equal %v, %d holds", c.name, i, l, err, bytes.Equal(pix, want), m.held)
			}
		}
	}
}

// TestSourceCaps: a Source has exactly the capabilities it honours —
// Namer, Labeler, DecoderNamer and Digester, and CapSized with size=any
// only — and
// a format embedding it adds its own (tar's shard order and prefetching).
func TestSourceCaps(t *testing.T) {
	jpg := loadertest.Fixture(t, "img/rgb.jpg")
	base := loader.CapNamer | loader.CapLabeler | loader.CapDecoder | loader.CapDigest
	for _, c := range []struct {
		name    string
		anySize bool
		shards  bool
		want    loader.Cap
	}{
		{"fixed", false, false, base},
		{"size=any", true, false, base | loader.CapSized},
		{"fixed, sharded", false, true, base | loader.CapShardOrder | loader.CapPrefetch},
		{"size=any, sharded", true, true, base | loader.CapSized | loader.CapShardOrder | loader.CapPrefetch},
	} {
		m := &memRecords{imgs: [][]byte{jpg}, labels: []int32{0}}
		s, err := NewSource(m, Options{Format: "mem", Path: "set", AnySize: c.anySize})
		if err != nil {
			t.Fatal(err)
		}
		var src loader.Source = s
		if c.shards {
			src = sharded{s, m}
		}
		if got := loader.Caps(src); got != c.want {
			t.Errorf("%s: Caps = %v, want %v", c.name, got, c.want)
		}
		if _, ok := loader.As[loader.SizedSource](src); ok != c.anySize {
			t.Errorf("%s: As SizedSource: %v", c.name, ok)
		}
		if _, ok := loader.As[loader.Prefetcher](src); ok != c.shards {
			t.Errorf("%s: As Prefetcher: %v", c.name, ok)
		}
		if d, ok := loader.As[loader.DecoderNamer](src); !ok || d.Decoder() != "go (image/jpeg)" {
			t.Errorf("%s: decoder %v", c.name, ok)
		}
		if err := src.Close(); err != nil || !m.closed {
			t.Errorf("%s: Close: %v, closed %v", c.name, err, m.closed)
		}
	}
}
