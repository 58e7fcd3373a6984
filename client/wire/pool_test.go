package wire

import "testing"

func TestPoolReuse(t *testing.T) {
	for _, n := range []int{0, 1, 255, 256, 257, 4096, 16 << 10, 3<<20 + 5} {
		b := Pool.Get(n)
		if len(*b) != n || cap(*b) < n || cap(*b)&(cap(*b)-1) != 0 {
			t.Fatalf("Get(%d): len %d cap %d", n, len(*b), cap(*b))
		}
		(*b)[:cap(*b)][0] = 42
		Pool.Put(b)
	}
	// A buffer not from the pool is dropped, not handed out with a wrong class.
	odd := make([]byte, 1000)
	Pool.Put(&odd)
	if b := Pool.Get(1000); cap(*b) != 1024 {
		t.Fatalf("Get(1000) has cap %d, want 1024", cap(*b))
	}
}

func BenchmarkGetPut(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		Pool.Put(Pool.Get(3 << 20))
	}
}
