//go:build linux

package cuda

import (
	"syscall"
	"testing"
	"unsafe"

	"github.com/loaderd/loaderd/trainer/tensor"
)

// benchCopyIn measures host → device copies of size bytes from pageable Go
// memory or from an anonymous shared mapping registered with
// cuMemHostRegister (what loaderd's shared-memory batches are).
func benchCopyIn(b *testing.B, registered bool, size int) {
	g := openGPU(b, Config{})
	mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_ANONYMOUS)
	if err != nil {
		b.Fatal(err)
	}
	defer syscall.Munmap(mem)
	for i := range mem {
		mem[i] = byte(i) // pre-fault
	}
	if registered {
		if err := g.RegisterHost(mem); err != nil {
			b.Fatal(err)
		}
		defer g.UnregisterHost(mem)
	}
	src := unsafe.Slice((*float32)(unsafe.Pointer(&mem[0])), size/4)
	dst, err := g.Alloc(tensor.F32, size/4)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := g.CopyIn(dst, src); err != nil {
			b.Fatal(err)
		}
		if err := g.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(size)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
}

func BenchmarkCopyIn(b *testing.B) {
	b.Run("mem=pageable/size=64MiB", func(b *testing.B) { benchCopyIn(b, false, 64<<20) })
	b.Run("mem=registered/size=64MiB", func(b *testing.B) { benchCopyIn(b, true, 64<<20) })
	b.Run("mem=pageable/size=3MiB", func(b *testing.B) { benchCopyIn(b, false, 3<<20) })
	b.Run("mem=registered/size=3MiB", func(b *testing.B) { benchCopyIn(b, true, 3<<20) })
}
