package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// naiveGemm is the float64 reference: C = alpha·op(A)·op(B) + beta·C.
func naiveGemm(ta, tb bool, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, beta float32, c []float32, ldc int) []float64 {
	out := make([]float64, len(c))
	for i := range c {
		out[i] = float64(c[i])
	}
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for p := 0; p < k; p++ {
				ai, bi := i*lda+p, p*ldb+j
				if ta {
					ai = p*lda + i
				}
				if tb {
					bi = j*ldb + p
				}
				av, bv := a[ai], b[bi]
				s += float64(av) * float64(bv)
			}
			o := float64(beta) * float64(c[i*ldc+j])
			if beta == 0 {
				o = 0
			}
			out[i*ldc+j] = float64(alpha)*s + o
		}
	}
	return out
}

func TestGemmMatchesNaive(t *testing.T) {
	shapes := [][3]int{{1, 1, 1}, {1, 7, 3}, {5, 1, 9}, {6, 16, 8}, {7, 17, 5},
		{13, 33, 300}, {97, 70, 31}, {64, 576, 64}, {200, 40, 520}, {3, 1100, 27}, {16, 2100, 27}}
	params := []struct{ alpha, beta float32 }{{1, 0}, {0.5, 1}, {-2, 0.25}}
	r := rand.New(rand.NewPCG(1, 2))
	for _, gk := range kernels() {
		for _, workers := range []int{1, 3} {
			d := newCPU(t, workers)
			d.gk = gk
			for si, s := range shapes {
				for _, ta := range []bool{false, true} {
					for _, tb := range []bool{false, true} {
						pr := params[(si+len(shapes)*btoi(ta)+2*btoi(tb))%len(params)]
						name := fmt.Sprintf("%s/w%d/%dx%dx%d/ta=%v/tb=%v", gk.name, workers, s[0], s[1], s[2], ta, tb)
						checkGemm(t, d, r, name, ta, tb, s[0], s[1], s[2], pr.alpha, pr.beta)
					}
				}
			}
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func checkGemm(t *testing.T, d *CPU, r *rand.Rand, name string, ta, tb bool, m, n, k int, alpha, beta float32) {
	t.Helper()
	pad := 3 // leading dimensions larger than the rows, to test strides
	ar, ac := m, k
	if ta {
		ar, ac = k, m
	}
	br, bc := k, n
	if tb {
		br, bc = n, k
	}
	lda, ldb, ldc := ac+pad, bc+pad, n+pad
	a, b, c := randVec(r, ar*lda), randVec(r, br*ldb), randVec(r, m*ldc)
	if beta == 0 {
		for i := range c {
			c[i] = float32(math.NaN()) // must not be read
		}
	}
	want := naiveGemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	ab, bb, cb := upload(t, d, a), upload(t, d, b), upload(t, d, c)
	d.Gemm(Transpose(ta), Transpose(tb), m, n, k, alpha, ab, lda, bb, ldb, beta, cb, ldc)
	got := download(t, d, cb)
	for i := 0; i < m; i++ {
		for j := 0; j < ldc; j++ {
			g, w := float64(got[i*ldc+j]), want[i*ldc+j]
			if j >= n { // padding columns stay untouched
				if !(got[i*ldc+j] == c[i*ldc+j] || (math.IsNaN(g) && math.IsNaN(float64(c[i*ldc+j])))) {
					t.Fatalf("%s: padding C[%d][%d] changed", name, i, j)
				}
				continue
			}
			tol := 1e-5 * (math.Sqrt(float64(k))*4 + 1) * (math.Abs(float64(alpha)) + 1)
			if math.Abs(g-w) > tol*(1+math.Abs(w)) || math.IsNaN(g) {
				t.Fatalf("%s: C[%d][%d] = %g, want %g", name, i, j, g, w)
			}
		}
	}
}

func TestGemmArgErrors(t *testing.T) {
	d := newCPU(t, 1)
	a := upload(t, d, make([]float32, 6))
	cases := []struct {
		name    string
		m, n, k int
		lda     int
	}{
		{"negative", -1, 2, 3, 3},
		{"lda too small", 2, 3, 3, 2},
		{"A too short", 3, 2, 3, 3},
	}
	for _, tc := range cases {
		d.Gemm(NoTrans, NoTrans, tc.m, tc.n, tc.k, 1, a, tc.lda, a, 2, 0, a, 2)
		if err := d.Sync(); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	other := newCPU(t, 1)
	b := upload(t, other, make([]float32, 6))
	d.Gemm(NoTrans, NoTrans, 1, 1, 1, 1, a, 1, b, 1, 0, a, 1)
	if err := d.Sync(); err == nil {
		t.Error("foreign buffer accepted")
	}
}
