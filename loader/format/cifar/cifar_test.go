package cifar

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/loader"
)

// The fixtures are shared with the loader's own tests.
const testdata = "../../testdata/"

func TestOpenCIFAR(t *testing.T) {
	tests := []struct {
		spec     string
		n        int64
		classes  int
		class0   string
		label3   int32
		firstPix byte // first pixel byte of record 3
	}{
		{spec: "cifar:" + testdata + "cifar10", n: 16, classes: 10, class0: "airplane", label3: 3},
		{spec: "cifar:" + testdata + "cifar10/data_batch_2.bin", n: 4, classes: 10, class0: "airplane", label3: 9},
		{spec: "cifar:" + testdata + "cifar100-train.bin", n: 5, classes: 100, class0: "0", label3: 51},
		{spec: "cifar100-coarse:" + testdata + "cifar100-train.bin", n: 5, classes: 20, class0: "0", label3: 3},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			src, err := loader.Open(tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			if src.Len() != tt.n || len(src.Classes()) != tt.classes || src.Classes()[0] != tt.class0 {
				t.Fatalf("len %d classes %d (%q), want %d %d (%q)", src.Len(), len(src.Classes()), src.Classes()[0], tt.n, tt.classes, tt.class0)
			}
			want := augment.Spec{H: 32, W: 32, C: 3, DType: sample.U8, Layout: sample.CHW}
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
	src, err := open(testdata+"cifar10", false)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	file, err := os.ReadFile(testdata + "cifar10/data_batch_2.bin")
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
		{"truncated", testdata + "bad/truncated.bin", loader.ErrTruncated, testdata + "bad/truncated.bin", 2},
		{"missing", filepath.Join(dir, "nope.bin"), fs.ErrNotExist, filepath.Join(dir, "nope.bin"), -1},
		{"empty file", empty, loader.ErrTruncated, empty, -1},
		{"empty dir", emptyDir, fs.ErrNotExist, emptyDir, -1},
		{"mixed record sizes", mixed, loader.ErrCorrupt, filepath.Join(mixed, "data_batch_2.bin"), -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, err := open(tt.path, false)
			if err == nil {
				src.Close()
				t.Fatal("opened bad input without error")
			}
			var re *loader.RecordError
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
	src, err := open(testdata+"bad", false)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for i := int64(0); i < src.Len(); i++ {
		_, _, err := src.Sample(i, nil)
		var re *loader.RecordError
		switch {
		case i == 2 && (!errors.Is(err, loader.ErrLabel) || !errors.As(err, &re) || re.Record != 2 || filepath.Base(re.File) != "data_batch_1.bin"):
			t.Fatalf("record 2: %v, want ErrLabel naming data_batch_1.bin record 2", err)
		case i != 2 && err != nil:
			t.Fatalf("record %d: %v", i, err)
		}
	}
	if _, _, err := src.Sample(src.Len(), nil); !errors.Is(err, loader.ErrIndex) {
		t.Fatalf("Sample(Len()) = %v, want ErrIndex", err)
	}
}
