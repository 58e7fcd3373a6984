package tensor

import (
	"math/rand/v2"
	"testing"
)

func newCPU(t testing.TB, workers int) *CPU {
	t.Helper()
	d, err := NewCPU("test", workers)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// upload allocates a buffer on d holding v.
func upload(t testing.TB, d Device, v []float32) Buffer {
	t.Helper()
	b, err := d.Alloc(F32, len(v))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.CopyIn(b, v); err != nil {
		t.Fatal(err)
	}
	return b
}

func uploadI(t testing.TB, d Device, v []int32) Buffer {
	t.Helper()
	b, err := d.Alloc(I32, len(v))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.CopyInInt32(b, v); err != nil {
		t.Fatal(err)
	}
	return b
}

func download(t testing.TB, d Device, b Buffer) []float32 {
	t.Helper()
	v := make([]float32, b.Len())
	if err := d.CopyOut(v, b); err != nil {
		t.Fatal(err)
	}
	return v
}

func randVec(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}
