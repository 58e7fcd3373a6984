package driver

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/loaderd/loaderd/trainer/internal/dynlib"
)

// CUDNNNames are the file names LoadCUDNN tries. cuDNN 9's libcudnn.so.9
// is a dispatcher that loads its sub-libraries (graph, ops, cnn, engines)
// on first use; the legacy convolution API bound here lives in them.
var CUDNNNames = []string{"libcudnn.so.9", "libcudnn.so", "libcudnn.so.*"}

// cudnnSubLibs are loaded from the dispatcher's own directory before it is
// used, so that a directory given by flag need not be on LD_LIBRARY_PATH
// (the pip wheel's nvidia/cudnn/lib seldom is).
var cudnnSubLibs = []string{"libcudnn_graph.so.9", "libcudnn_ops.so.9", "libcudnn_cnn.so.9",
	"libcudnn_engines_precompiled.so.9", "libcudnn_engines_runtime_compiled.so.9", "libcudnn_heuristic.so.9"}

// cuDNN enums used by the bindings (cudnn_graph.h, cudnn_cnn.h).
const (
	DNNFloat    = 0 // CUDNN_DATA_FLOAT
	DNNHalf     = 2 // CUDNN_DATA_HALF
	DNNBFloat16 = 9 // CUDNN_DATA_BFLOAT16

	DNNFormatNCHW = 0 // CUDNN_TENSOR_NCHW
	DNNFormatNHWC = 1 // CUDNN_TENSOR_NHWC

	DNNCrossCorrelation = 1 // CUDNN_CROSS_CORRELATION: what deep learning calls convolution

	DNNDefaultMath = 0 // CUDNN_DEFAULT_MATH: tensor cores, TF32 for f32 data
	DNNTensorOp    = 1 // CUDNN_TENSOR_OP_MATH
	DNNFMAMath     = 3 // CUDNN_FMA_MATH: f32 arithmetic, no TF32

	DNNSuccess = 0 // CUDNN_STATUS_SUCCESS
)

// DNNAlgoPerf is cudnnConvolution{Fwd,BwdData,BwdFilter}AlgoPerf_t, one
// layout for all three: an algorithm, its status, time (ms) and workspace.
type DNNAlgoPerf struct {
	Algo        int32
	Status      int32
	Time        float32
	Memory      uint64
	Determinism int32
	MathType    int32
	_           [3]int32 // reserved
}

// Size of the C struct: 3 ints, a float's padding, size_t, 5 ints → 48.
const dnnAlgoPerfSize = 48

var _ [dnnAlgoPerfSize - unsafe.Sizeof(DNNAlgoPerf{})]struct{}
var _ [unsafe.Sizeof(DNNAlgoPerf{}) - dnnAlgoPerfSize]struct{}

// CUDNN holds the bound cuDNN functions; a status of 0 is success. The
// descriptors are opaque pointers. Tests fill the fields by hand to stand
// in for the library.
type CUDNN struct {
	lib  *lib
	subs []*lib

	GetVersion     func() uint64
	GetErrorString func(status int32) string
	Create         func(h *uintptr) int32
	Destroy        func(h uintptr) int32
	SetStream      func(h uintptr, s Stream) int32

	CreateTensor  func(d *uintptr) int32
	DestroyTensor func(d uintptr) int32
	SetTensor4dEx func(d uintptr, dtype int32, n, c, h, w, ns, cs, hs, ws int32) int32
	CreateFilter  func(d *uintptr) int32
	DestroyFilter func(d uintptr) int32
	SetFilter4d   func(d uintptr, dtype, format int32, k, c, h, w int32) int32
	CreateConv    func(d *uintptr) int32
	DestroyConv   func(d uintptr) int32
	SetConv2d     func(d uintptr, padH, padW, u, v, dilH, dilW int32, mode, compute int32) int32
	SetConvMath   func(d uintptr, math int32) int32

	// Heuristic choices (no work is run) and measured ones (each candidate
	// runs once on the given buffers, with the given workspace).
	GetFwdAlgo   func(h, x, w, conv, y uintptr, want int32, got *int32, perf *DNNAlgoPerf) int32
	GetBwdDAlgo  func(h, w, dy, conv, dx uintptr, want int32, got *int32, perf *DNNAlgoPerf) int32
	GetBwdFAlgo  func(h, x, dy, conv, dw uintptr, want int32, got *int32, perf *DNNAlgoPerf) int32
	FindFwdAlgo  func(h, xd uintptr, x DevicePtr, wd uintptr, w DevicePtr, conv, yd uintptr, y DevicePtr, want int32, got *int32, perf *DNNAlgoPerf, ws DevicePtr, wsBytes uint64) int32
	FindBwdDAlgo func(h, wd uintptr, w DevicePtr, dyd uintptr, dy DevicePtr, conv, dxd uintptr, dx DevicePtr, want int32, got *int32, perf *DNNAlgoPerf, ws DevicePtr, wsBytes uint64) int32
	FindBwdFAlgo func(h, xd uintptr, x DevicePtr, dyd uintptr, dy DevicePtr, conv, dwd uintptr, dw DevicePtr, want int32, got *int32, perf *DNNAlgoPerf, ws DevicePtr, wsBytes uint64) int32

	FwdWorkspace  func(h, x, w, conv, y uintptr, algo int32, bytes *uint64) int32
	BwdDWorkspace func(h, w, dy, conv, dx uintptr, algo int32, bytes *uint64) int32
	BwdFWorkspace func(h, x, dy, conv, dw uintptr, algo int32, bytes *uint64) int32

	// alpha and beta point at host floats (f32 data) read before return.
	ConvFwd     func(h uintptr, alpha unsafe.Pointer, xd uintptr, x DevicePtr, wd uintptr, w DevicePtr, conv uintptr, algo int32, ws DevicePtr, wsBytes uint64, beta unsafe.Pointer, yd uintptr, y DevicePtr) int32
	ConvBwdData func(h uintptr, alpha unsafe.Pointer, wd uintptr, w DevicePtr, dyd uintptr, dy DevicePtr, conv uintptr, algo int32, ws DevicePtr, wsBytes uint64, beta unsafe.Pointer, dxd uintptr, dx DevicePtr) int32
	ConvBwdFilt func(h uintptr, alpha unsafe.Pointer, xd uintptr, x DevicePtr, dyd uintptr, dy DevicePtr, conv uintptr, algo int32, ws DevicePtr, wsBytes uint64, beta unsafe.Pointer, dwd uintptr, dw DevicePtr) int32
}

// LoadCUDNN opens libcudnn (version 9) and binds the convolution API.
// Without cuDNN it returns a *LibError wrapping ErrNotFound.
func LoadCUDNN(o Options) (*CUDNN, error) {
	l, err := open("cuDNN", o, CUDNNNames, nil)
	if err != nil {
		return nil, err
	}
	c := &CUDNN{lib: l}
	dir := filepath.Dir(l.path)
	for _, s := range cudnnSubLibs {
		p := filepath.Join(dir, s)
		if !strings.Contains(l.path, "/") {
			break // found through the loader's path: so will its sub-libraries be
		}
		if _, err := os.Stat(p); err != nil {
			continue
		}
		if h, err := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_GLOBAL); err == nil {
			c.subs = append(c.subs, &lib{what: "cuDNN", path: p, handle: h})
		}
	}
	err = l.bind([]dynlib.Func{
		{Ptr: &c.GetVersion, Name: "cudnnGetVersion"},
		{Ptr: &c.GetErrorString, Name: "cudnnGetErrorString"},
		{Ptr: &c.Create, Name: "cudnnCreate"},
		{Ptr: &c.Destroy, Name: "cudnnDestroy"},
		{Ptr: &c.SetStream, Name: "cudnnSetStream"},
		{Ptr: &c.CreateTensor, Name: "cudnnCreateTensorDescriptor"},
		{Ptr: &c.DestroyTensor, Name: "cudnnDestroyTensorDescriptor"},
		{Ptr: &c.SetTensor4dEx, Name: "cudnnSetTensor4dDescriptorEx"},
		{Ptr: &c.CreateFilter, Name: "cudnnCreateFilterDescriptor"},
		{Ptr: &c.DestroyFilter, Name: "cudnnDestroyFilterDescriptor"},
		{Ptr: &c.SetFilter4d, Name: "cudnnSetFilter4dDescriptor"},
		{Ptr: &c.CreateConv, Name: "cudnnCreateConvolutionDescriptor"},
		{Ptr: &c.DestroyConv, Name: "cudnnDestroyConvolutionDescriptor"},
		{Ptr: &c.SetConv2d, Name: "cudnnSetConvolution2dDescriptor"},
		{Ptr: &c.SetConvMath, Name: "cudnnSetConvolutionMathType"},
		{Ptr: &c.GetFwdAlgo, Name: "cudnnGetConvolutionForwardAlgorithm_v7"},
		{Ptr: &c.GetBwdDAlgo, Name: "cudnnGetConvolutionBackwardDataAlgorithm_v7"},
		{Ptr: &c.GetBwdFAlgo, Name: "cudnnGetConvolutionBackwardFilterAlgorithm_v7"},
		{Ptr: &c.FindFwdAlgo, Name: "cudnnFindConvolutionForwardAlgorithmEx"},
		{Ptr: &c.FindBwdDAlgo, Name: "cudnnFindConvolutionBackwardDataAlgorithmEx"},
		{Ptr: &c.FindBwdFAlgo, Name: "cudnnFindConvolutionBackwardFilterAlgorithmEx"},
		{Ptr: &c.FwdWorkspace, Name: "cudnnGetConvolutionForwardWorkspaceSize"},
		{Ptr: &c.BwdDWorkspace, Name: "cudnnGetConvolutionBackwardDataWorkspaceSize"},
		{Ptr: &c.BwdFWorkspace, Name: "cudnnGetConvolutionBackwardFilterWorkspaceSize"},
		{Ptr: &c.ConvFwd, Name: "cudnnConvolutionForward"},
		{Ptr: &c.ConvBwdData, Name: "cudnnConvolutionBackwardData"},
		{Ptr: &c.ConvBwdFilt, Name: "cudnnConvolutionBackwardFilter"},
	})
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Path returns the file cuDNN was loaded from ("" for hand-made bindings).
func (c *CUDNN) Path() string {
	if c.lib == nil {
		return ""
	}
	return c.lib.path
}

// Version returns cuDNN's version as major·10000 + minor·100 + patch
// (9.10.2 is 91002), or 0 for hand-made bindings without GetVersion.
func (c *CUDNN) Version() int {
	if c.GetVersion == nil {
		return 0
	}
	return int(c.GetVersion())
}

// VersionString is Version as "9.14.0" ("0.0.0" for hand-made bindings).
func (c *CUDNN) VersionString() string {
	v := c.Version()
	return fmt.Sprintf("%d.%d.%d", v/10000, v/100%100, v%100)
}

// Close unloads the library (the sub-libraries stay loaded: cuDNN may hold
// pointers into them until process exit).
func (c *CUDNN) Close() error {
	if c.lib == nil {
		return nil
	}
	return c.lib.close()
}
