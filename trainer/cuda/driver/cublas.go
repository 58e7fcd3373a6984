package driver

import (
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/loaderd/loaderd/trainer/internal/dynlib"
)

// CUBLASNames are the file names LoadCUBLAS tries.
var CUBLASNames = []string{"libcublas.so", "libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so.*"}

// cuBLAS enums used by the bindings (cublas_api.h, library_types.h).
const (
	OpN = 0 // CUBLAS_OP_N
	OpT = 1 // CUBLAS_OP_T

	DataR32F  = 0  // CUDA_R_32F
	DataR16F  = 2  // CUDA_R_16F
	DataR16BF = 14 // CUDA_R_16BF

	Compute32F         = 68 // CUBLAS_COMPUTE_32F
	Compute32FFastTF32 = 77 // CUBLAS_COMPUTE_32F_FAST_TF32
	GemmDefault        = -1 // CUBLAS_GEMM_DEFAULT

	DefaultMath      = 0 // CUBLAS_DEFAULT_MATH
	TF32TensorOpMath = 3 // CUBLAS_TF32_TENSOR_OP_MATH
)

// CUBLAS holds the bound cuBLAS functions; a status of 0 is success.
type CUBLAS struct {
	lib      *lib
	rawSgemm uintptr // cublasSgemm_v2 on the cheap call path

	Create    func(h *uintptr) int32
	Destroy   func(h uintptr) int32
	SetStream func(h uintptr, s Stream) int32
	SetMath   func(h uintptr, mode int32) int32
	Sgemm     func(h uintptr, ta, tb int32, m, n, k int32, alpha *float32, a DevicePtr, lda int32,
		b DevicePtr, ldb int32, beta *float32, c DevicePtr, ldc int32) int32
	GemmEx func(h uintptr, ta, tb int32, m, n, k int32, alpha unsafe.Pointer,
		a DevicePtr, at int32, lda int32, b DevicePtr, bt int32, ldb int32, beta unsafe.Pointer,
		c DevicePtr, ct int32, ldc int32, compute int32, algo int32) int32
}

// LoadCUBLAS opens libcublas and binds the GEMM entry points. Without cuBLAS
// it returns a *LibError wrapping ErrNotFound.
func LoadCUBLAS(o Options) (*CUBLAS, error) {
	skip := func(p string) bool { return strings.Contains(p, "cublasLt") }
	l, err := open("cuBLAS", o, CUBLASNames, skip)
	if err != nil {
		return nil, err
	}
	c := &CUBLAS{lib: l}
	err = l.bind([]dynlib.Func{
		{Ptr: &c.Create, Name: "cublasCreate_v2"},
		{Ptr: &c.Destroy, Name: "cublasDestroy_v2"},
		{Ptr: &c.SetStream, Name: "cublasSetStream_v2"},
		{Ptr: &c.SetMath, Name: "cublasSetMathMode"},
		{Ptr: &c.Sgemm, Name: "cublasSgemm_v2"},
		{Ptr: &c.GemmEx, Name: "cublasGemmEx"},
	})
	if err != nil {
		l.close()
		return nil, err
	}
	c.rawSgemm, _ = purego.Dlsym(l.handle, "cublasSgemm_v2") // checked by bind
	return c, nil
}

// Sgemm32 is Sgemm through purego.SyscallN (one allocation per call, not
// one per argument), falling back to the Sgemm field for hand-made bindings.
func (c *CUBLAS) Sgemm32(h uintptr, ta, tb int32, m, n, k int32, alpha *float32, a DevicePtr, lda int32,
	b DevicePtr, ldb int32, beta *float32, cp DevicePtr, ldc int32) int32 {
	if c.rawSgemm == 0 {
		return c.Sgemm(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, cp, ldc)
	}
	r, _, _ := purego.SyscallN(c.rawSgemm, h, uintptr(ta), uintptr(tb), uintptr(m), uintptr(n), uintptr(k),
		uintptr(unsafe.Pointer(alpha)), uintptr(a), uintptr(lda), uintptr(b), uintptr(ldb),
		uintptr(unsafe.Pointer(beta)), uintptr(cp), uintptr(ldc))
	return int32(r)
}

// Path returns the file cuBLAS was loaded from.
func (c *CUBLAS) Path() string { return c.lib.path }
