package cuda

import (
	"math"
	"strconv"

	"github.com/loaderd/loaderd/trainer/cuda/driver"
	"github.com/loaderd/loaderd/trainer/tensor"
)

func need(rows, cols, ld int) int { return (rows-1)*ld + cols }

// Gemm computes C = alpha·op(A)·op(B) + beta·C (row-major) with cuBLAS:
// a row-major C is a column-major Cᵀ = op(B)ᵀ·op(A)ᵀ, so the operands swap.
// Without cuBLAS a reference kernel does it.
func (d *Device) Gemm(ta, tb tensor.Transpose, m, n, k int, alpha float32, a tensor.Buffer, lda int,
	b tensor.Buffer, ldb int, beta float32, c tensor.Buffer, ldc int) {
	if m < 0 || n < 0 || k < 0 {
		d.fail(argError("gemm", "negative size m=%d n=%d k=%d", m, n, k))
		return
	}
	pa, ok1 := d.fp("gemm", a, -1)
	pb, ok2 := d.fp("gemm", b, -1)
	pc, ok3 := d.fp("gemm", c, -1)
	if !ok1 || !ok2 || !ok3 || m == 0 || n == 0 {
		return
	}
	ar, ac := m, k
	if ta {
		ar, ac = k, m
	}
	br, bc := k, n
	if tb {
		br, bc = n, k
	}
	switch {
	case ldc < n || c.Len() < need(m, n, ldc):
		d.fail(argError("gemm", "C: ldc %d, len %d for %d×%d", ldc, c.Len(), m, n))
		return
	case k > 0 && (lda < ac || a.Len() < need(ar, ac, lda)):
		d.fail(argError("gemm", "A: lda %d, len %d for stored %d×%d", lda, a.Len(), ar, ac))
		return
	case k > 0 && (ldb < bc || b.Len() < need(br, bc, ldb)):
		d.fail(argError("gemm", "B: ldb %d, len %d for stored %d×%d", ldb, b.Len(), br, bc))
		return
	case max(m, n, k, lda, ldb, ldc) > math.MaxInt32:
		d.fail(argError("gemm", "sizes beyond int32"))
		return
	}
	if !d.enter() {
		return
	}
	defer d.leave()
	if k == 0 || alpha == 0 {
		d.ptr(pc)
		d.i32(m)
		d.i32(n)
		d.i32(ldc)
		d.f32(beta)
		d.launch("gemm", kScaleMat, grid(int64(m)*int64(n)))
		return
	}
	if d.blas == nil {
		d.i32(b2i(bool(ta)))
		d.i32(b2i(bool(tb)))
		d.i32(m)
		d.i32(n)
		d.i32(k)
		d.f32(alpha)
		d.ptr(pa)
		d.i32(lda)
		d.ptr(pb)
		d.i32(ldb)
		d.f32(beta)
		d.ptr(pc)
		d.i32(ldc)
		d.launch("gemm", kGemm, grid(int64(m)*int64(n)))
		return
	}
	opA, opB := int32(driver.OpN), int32(driver.OpN)
	if ta {
		opA = driver.OpT
	}
	if tb {
		opB = driver.OpT
	}
	// alpha and beta are read by cuBLAS before Sgemm returns (host pointer mode).
	al, be := alpha, beta
	t0 := d.profStart()
	if st := d.blas.Sgemm32(d.blasH, opB, opA, int32(n), int32(m), int32(k), &al,
		pb, int32(ldb), pa, int32(lda), &be, pc, int32(ldc)); st != 0 {
		d.fail(&blasError{op: "cublasSgemm_v2", status: st})
	}
	if d.prof != nil {
		d.profEnd(t0, gemmKey(bool(ta), bool(tb), m, n, k))
	}
}

type blasError struct {
	op     string
	status int32
}

func (e *blasError) Error() string {
	return "cuda: " + e.op + ": cuBLAS status " + strconv.Itoa(int(e.status))
}
