package loader

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/loaderd/loaderd/augment"
)

func TestOpenCIFAR(t *testing.T) {
	tests := []struct {
		spec     string
		n        int64
		classes  int
		class0   string
		label3   int32
		firstPix byte // first pixel byte of record 3
	}{
		{spec: "cifar:testdata/cifar10", n: 16, classes: 10, class0: "airplane", label3: 3},
		{spec: "cifar:testdata/cifar10/data_batch_2.bin", n: 4, classes: 10, class0: "airplane", label3: 9},
		{spec: "cifar:testdata/cifar100-train.bin", n: 5, classes: 100, class0: "0", label3: 51},
		{spec: "cifar100-coarse:testdata/cifar100-train.bin", n: 5, classes: 20, class0: "0", label3: 3},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			src, err := Open(tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			if src.Len() != tt.n || len(src.Classes()) != tt.classes || src.Classes()[0] != tt.class0 {
				t.Fatalf("len %d classes %d (%q), want %d %d (%q)", src.Len(), len(src.Classes()), src.Classes()[0], tt.n, tt.classes, tt.class0)
			}
			want := augment.Spec{H: 32, W: 32, C: 3, DType: augment.U8, Layout: augment.CHW}
			if src.Spec() != want {
				t.Fatalf("spec %v, want %v", src.Spec(), want)
			}
			label, _, err := src.Sample(3, nil)
			if err != nil || label != tt.label3 {
				t.Fatalf("Sample(3) = %d, %v; want label %d", label, err, tt.label3)
			}
		})
	}
}

// TestCIFARZeroCopy checks that pixels are a view of the mapped file:
// the bytes match the file and two calls return the same memory.
func TestCIFARZeroCopy(t *testing.T) {
	src, err := OpenCIFAR("testdata/cifar10", CIFAROptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	file, err := os.ReadFile("testdata/cifar10/data_batch_2.bin")
	if err != nil {
		t.Fatal(err)
	}
	scratch := make([]byte, 3072)
	for r := 0; r < 4; r++ {
		label, pix, err := src.Sample(int64(12+r), scratch)
		if err != nil {
			t.Fatal(err)
		}
		rec := file[r*3073 : (r+1)*3073]
		if label != int32(rec[0]) || !bytes.Equal(pix, rec[1:]) {
			t.Fatalf("record %d of data_batch_2 differs from the file", r)
		}
		_, again, _ := src.Sample(int64(12+r), scratch)
		if unsafe.SliceData(pix) != unsafe.SliceData(again) || unsafe.SliceData(pix) == unsafe.SliceData(scratch) {
			t.Fatalf("record %d: pixels are a copy, not a view of the mapping", r)
		}
	}
}

func TestCIFARBadInput(t *testing.T) {
	dir := t.TempDir()
	mixed := filepath.Join(dir, "mixed")
	os.Mkdir(mixed, 0o755)
	os.WriteFile(filepath.Join(mixed, "data_batch_1.bin"), make([]byte, 3073*2), 0o644)
	os.WriteFile(filepath.Join(mixed, "data_batch_2.bin"), make([]byte, 3074*3), 0o644)
	empty := filepath.Join(dir, "empty.bin")
	os.WriteFile(empty, nil, 0o644)
	emptyDir := filepath.Join(dir, "nothing")
	os.Mkdir(emptyDir, 0o755)

	tests := []struct {
		name   string
		path   string
		is     error
		file   string
		record int64
	}{
		{"truncated", "testdata/bad/truncated.bin", ErrTruncated, "testdata/bad/truncated.bin", 2},
		{"missing", filepath.Join(dir, "nope.bin"), fs.ErrNotExist, filepath.Join(dir, "nope.bin"), -1},
		{"empty file", empty, ErrTruncated, empty, -1},
		{"empty dir", emptyDir, fs.ErrNotExist, emptyDir, -1},
		{"mixed record sizes", mixed, ErrCorrupt, filepath.Join(mixed, "data_batch_2.bin"), -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, err := OpenCIFAR(tt.path, CIFAROptions{})
			if err == nil {
				src.Close()
				t.Fatal("opened bad input without error")
			}
			var re *RecordError
			if !errors.Is(err, tt.is) || !errors.As(err, &re) {
				t.Fatalf("error %v: want a *RecordError wrapping %v", err, tt.is)
			}
			if re.File != tt.file || re.Record != tt.record {
				t.Fatalf("error names %s record %d, want %s record %d", re.File, re.Record, tt.file, tt.record)
			}
		})
	}
}

func TestCIFARLabelOutOfRange(t *testing.T) {
	src, err := OpenCIFAR("testdata/bad", CIFAROptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for i := int64(0); i < src.Len(); i++ {
		_, _, err := src.Sample(i, nil)
		var re *RecordError
		switch {
		case i == 2 && (!errors.Is(err, ErrLabel) || !errors.As(err, &re) || re.Record != 2 || filepath.Base(re.File) != "data_batch_1.bin"):
			t.Fatalf("record 2: %v, want ErrLabel naming data_batch_1.bin record 2", err)
		case i != 2 && err != nil:
			t.Fatalf("record %d: %v", i, err)
		}
	}
	if _, _, err := src.Sample(src.Len(), nil); !errors.Is(err, ErrIndex) {
		t.Fatalf("Sample(Len()) = %v, want ErrIndex", err)
	}
}

func TestOpenUnknownFormat(t *testing.T) {
	_, err := Open("jpegxl:/tmp/x")
	if !errors.Is(err, ErrUnknownFormat) {
		t.Fatalf("got %v, want ErrUnknownFormat", err)
	}
	for _, bad := range []string{"synthetic:0", "synthetic:-3", "synthetic:abc", "cifar:"} {
		if src, err := Open(bad); err == nil {
			src.Close()
			t.Errorf("Open(%q) succeeded", bad)
		}
	}
}

func TestSynthetic(t *testing.T) {
	src, err := Open("synthetic:1000")
	if err != nil {
		t.Fatal(err)
	}
	a, b := make([]byte, 3072), make([]byte, 3072)
	counts := make([]int, 10)
	for i := int64(0); i < src.Len(); i++ {
		la, pa, err := src.Sample(i, a)
		if err != nil {
			t.Fatal(err)
		}
		lb, pb, _ := src.Sample(i, b)
		if la != lb || !bytes.Equal(pa, pb) {
			t.Fatalf("sample %d is not deterministic", i)
		}
		counts[la]++
	}
	for c, n := range counts {
		if n < 60 || n > 140 {
			t.Fatalf("class %d has %d of 1000 samples; labels are not spread", c, n)
		}
	}
	if _, _, err := src.Sample(1000, a); !errors.Is(err, ErrIndex) {
		t.Fatalf("Sample(1000) = %v, want ErrIndex", err)
	}
}

// TestSyntheticLearnable checks the classes differ in a way a model can
// pick up: a nearest-class-mean classifier on mean colour is far above
// chance on held-out samples.
func TestSyntheticLearnable(t *testing.T) {
	src := NewSynthetic(2000, 0)
	buf := make([]byte, 3072)
	meanColour := func(i int64) (int32, [3]float64) {
		label, pix, _ := src.Sample(i, buf)
		var m [3]float64
		for k, v := range pix {
			m[k%3] += float64(v) / 1024
		}
		return label, m
	}
	var centre [10][3]float64
	var count [10]float64
	for i := int64(0); i < 1000; i++ {
		l, m := meanColour(i)
		for c := range m {
			centre[l][c] += m[c]
		}
		count[l]++
	}
	correct := 0
	for i := int64(1000); i < 2000; i++ {
		l, m := meanColour(i)
		best, bestD := -1, 0.0
		for k := range centre {
			d := 0.0
			for c := range m {
				x := m[c] - centre[k][c]/count[k]
				d += x * x
			}
			if best < 0 || d < bestD {
				best, bestD = k, d
			}
		}
		if int32(best) == l {
			correct++
		}
	}
	if correct < 800 {
		t.Fatalf("nearest-mean accuracy %d/1000: classes are not separable", correct)
	}
}

func TestOpenHoldout(t *testing.T) {
	train, err := Open("synthetic:1000?holdout=20")
	if err != nil {
		t.Fatal(err)
	}
	val, err := Open("synthetic:1000?holdout=20&part=val")
	if err != nil {
		t.Fatal(err)
	}
	if train.Len()+val.Len() != 1000 || val.Len() != 200 {
		t.Fatalf("train %d + val %d, want 800 + 200", train.Len(), val.Len())
	}
	for _, bad := range []string{"synthetic:10?part=val", "synthetic:10?holdout=x", "synthetic:10?holdout=1&part=test"} {
		if _, err := Open(bad); err == nil {
			t.Errorf("Open(%q) succeeded", bad)
		}
	}
}

// TestOpenErrorIsNilSource: a failed Open returns a nil interface, not an
// interface holding a nil pointer that would panic on Close.
func TestOpenErrorIsNilSource(t *testing.T) {
	for _, spec := range []string{"cifar:testdata/nope", "cifar100-coarse:testdata/nope", "tar:testdata/nope.tar", "folder:testdata/nope"} {
		src, err := Open(spec)
		if err == nil || src != nil {
			t.Errorf("Open(%q) = %v, %v; want nil and an error", spec, src, err)
		}
	}
}
