package imagedec

import "github.com/ebitengine/purego"

// libjpeg takes each image's working memory (row buffers, and for a
// progressive file the whole image's coefficients: ~1 MiB for a 500×375
// 4:4:4 photo) from malloc and frees it after the image. With glibc's
// defaults that memory goes back to the kernel (mmap'd chunks, and a heap
// top trimmed past the dynamic M_TRIM_THRESHOLD), so the next image faults
// it in again: ~8.5 minor faults and ~20 µs of system time per image of
// the large-image set, out of ~950 µs of decode. Fixed thresholds keep it:
// 0 faults per image in steady state. The cost is memory kept: each malloc
// arena (one per OS thread that decoded, at most 8 per core) keeps the
// largest libjpeg working set it served, up to mallocTrim of free memory
// (a few MiB for ImageNet-sized photos); blocks over mallocMmap (the
// coefficients of a progressive image over ~1.4 Mpx at 4:4:4, ~2.8 Mpx at
// 4:2:0) are still mmap'd and returned at once. LOADERD_MALLOPT=0 leaves
// glibc's defaults.
const (
	mallocMmap = 8 << 20  // M_MMAP_THRESHOLD
	mallocTrim = 16 << 20 // M_TRIM_THRESHOLD
)

// glibc's mallopt parameters (malloc.h).
const (
	mTrimThreshold = -1
	mMmapThreshold = -3
)

// tuneMalloc sets glibc's thresholds once, when the turbo backend loads.
// A libc without mallopt (musl has none) is left as it is: the cost is
// speed, never correctness.
func tuneMalloc() {
	h, err := purego.Dlopen("libc.so.6", purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return
	}
	p, ok := dlsym(h, "mallopt")
	if !ok {
		return
	}
	for _, s := range [...]struct{ param, value int32 }{{mMmapThreshold, mallocMmap}, {mTrimThreshold, mallocTrim}} {
		purego.SyscallN(p, uintptr(s.param), uintptr(s.value))
	}
}
