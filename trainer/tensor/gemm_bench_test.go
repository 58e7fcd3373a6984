package tensor

import (
	"math/rand/v2"
	"testing"
)

// naiveLoop is the baseline the packed GEMM is measured against: the plain
// i-k-j triple loop in float32 (row-major, no transposes).
func naiveLoop(m, n, k int, a, b, c []float32) {
	for i := 0; i < m; i++ {
		crow := c[i*n : i*n+n]
		clear(crow)
		for p := 0; p < k; p++ {
			av := a[i*k+p]
			brow := b[p*n : p*n+n]
			for j, bv := range brow {
				crow[j] += av * bv
			}
		}
	}
}

func benchGemm(b *testing.B, kern string, workers, m, n, k int) {
	r := rand.New(rand.NewPCG(3, 4))
	av, bv, cv := randVec(r, m*k), randVec(r, k*n), make([]float32, m*n)
	flops := 2 * float64(m) * float64(n) * float64(k)
	b.ReportAllocs()
	b.SetBytes(int64(4 * (m*k + k*n + m*n)))
	if kern == "naive" {
		b.ResetTimer()
		for range b.N {
			naiveLoop(m, n, k, av, bv, cv)
		}
	} else {
		d := newCPU(b, workers)
		for _, gk := range kernels() {
			if gk.name == kern {
				d.gk = gk
			}
		}
		if d.gk.name != kern {
			b.Skipf("kernel %s not available here", kern)
		}
		ab, bb, cb := upload(b, d, av), upload(b, d, bv), upload(b, d, cv)
		b.ResetTimer()
		for range b.N {
			d.Gemm(NoTrans, NoTrans, m, n, k, 1, ab, k, bb, n, 0, cb, n)
		}
		if err := d.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

func BenchmarkGemm(b *testing.B) {
	for _, c := range []struct {
		name    string
		kern    string
		workers int
		m, n, k int
	}{
		{"kern=naive/shape=512", "naive", 1, 512, 512, 512},
		{"kern=go/workers=1/shape=512", "go4x16", 1, 512, 512, 512},
		{"kern=avx2/workers=1/shape=512", "avx2-6x16", 1, 512, 512, 512},
		{"kern=avx2/workers=2/shape=512", "avx2-6x16", 2, 512, 512, 512},
		{"kern=avx2/workers=2/shape=1024", "avx2-6x16", 2, 1024, 1024, 1024},
		{"kern=avx2/workers=2/shape=conv64x1792x576", "avx2-6x16", 2, 64, 1792, 576},
		{"kern=avx2/workers=2/shape=conv16x37888x27", "avx2-6x16", 2, 16, 37888, 27},
	} {
		b.Run(c.name, func(b *testing.B) { benchGemm(b, c.kern, c.workers, c.m, c.n, c.k) })
	}
}
