package loader

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// FuzzWeightsFile: any bytes as a weights file of 1 to 8 samples give
// either an ErrSampler error or exactly n finite, non-negative weights of
// which one at least is positive; never a panic.
func FuzzWeightsFile(f *testing.F) {
	f.Add([]byte("1\n2\n0.5\n"), uint8(3))
	f.Add([]byte("# w\n\n1e-3\n"), uint8(1))
	f.Add([]byte("\x93NUMPY\x01\x00v\x00{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }"+
		"                                          \n\x00\x00\x00\x00\x00\x00\xf0?"), uint8(1))
	f.Add([]byte("\x93NUMPY\x01\x00\x10\x00{'descr': '<f4'}"), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, k uint8) {
		n := int64(k%8) + 1
		file := filepath.Join(t.TempDir(), "w")
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		w, err := readWeights(file, n)
		if err != nil {
			if !errors.Is(err, ErrSampler) {
				t.Fatalf("error %v does not wrap ErrSampler", err)
			}
			return
		}
		if int64(len(w)) != n {
			t.Fatalf("%d weights for %d samples", len(w), n)
		}
		pos := false
		for _, x := range w {
			if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
				t.Fatalf("weight %v accepted", x)
			}
			pos = pos || x > 0
		}
		if !pos {
			t.Fatal("all-zero weights accepted")
		}
	})
}
