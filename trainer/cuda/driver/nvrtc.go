package driver

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/loaderd/loaderd/trainer/internal/dynlib"
)

// NVRTCNames are the file names LoadNVRTC tries, newest CUDA first; the
// glob picks up any other versioned name (Debian ships libnvrtc.so.11.2).
var NVRTCNames = []string{"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so.*"}

// NVRTC holds the bound functions of CUDA's run-time compiler.
type NVRTC struct {
	lib *lib

	version        func(major, minor *int32) int32
	createProgram  func(p *uintptr, src, name string, nh int32, headers, includes unsafe.Pointer) int32
	compileProgram func(p uintptr, nopt int32, opts unsafe.Pointer) int32
	getPTXSize     func(p uintptr, n *uint64) int32
	getPTX         func(p uintptr, buf *byte) int32
	getCUBINSize   func(p uintptr, n *uint64) int32 // nil before NVRTC 11.1
	getCUBIN       func(p uintptr, buf *byte) int32
	getLogSize     func(p uintptr, n *uint64) int32
	getLog         func(p uintptr, buf *byte) int32
	destroyProgram func(p *uintptr) int32
	getErrorString func(r int32) string
}

// CompileError is a failed NVRTC call; for a failed compilation Log holds
// the compiler's messages.
type CompileError struct {
	Op   string
	Code int32
	Msg  string
	Log  string
}

func (e *CompileError) Error() string {
	s := fmt.Sprintf("driver: nvrtc %s: %s (%d)", e.Op, e.Msg, e.Code)
	if e.Log != "" {
		s += "\n" + strings.TrimSpace(e.Log)
	}
	return s
}

// LoadNVRTC opens libnvrtc and binds the functions Compile needs. Without
// NVRTC it returns a *LibError wrapping ErrNotFound.
func LoadNVRTC(o Options) (*NVRTC, error) {
	skip := func(p string) bool { return strings.Contains(p, "builtins") }
	l, err := open("NVRTC", o, NVRTCNames, skip)
	if err != nil {
		return nil, err
	}
	n := &NVRTC{lib: l}
	err = l.bind([]dynlib.Func{
		{Ptr: &n.version, Name: "nvrtcVersion"},
		{Ptr: &n.createProgram, Name: "nvrtcCreateProgram"},
		{Ptr: &n.compileProgram, Name: "nvrtcCompileProgram"},
		{Ptr: &n.getPTXSize, Name: "nvrtcGetPTXSize"},
		{Ptr: &n.getPTX, Name: "nvrtcGetPTX"},
		{Ptr: &n.getLogSize, Name: "nvrtcGetProgramLogSize"},
		{Ptr: &n.getLog, Name: "nvrtcGetProgramLog"},
		{Ptr: &n.destroyProgram, Name: "nvrtcDestroyProgram"},
		{Ptr: &n.getErrorString, Name: "nvrtcGetErrorString"},
	})
	if err != nil {
		l.close()
		return nil, err
	}
	if _, e := purego.Dlsym(l.handle, "nvrtcGetCUBIN"); e == nil {
		err = l.bind([]dynlib.Func{
			{Ptr: &n.getCUBINSize, Name: "nvrtcGetCUBINSize"},
			{Ptr: &n.getCUBIN, Name: "nvrtcGetCUBIN"},
		})
		if err != nil {
			l.close()
			return nil, err
		}
	}
	return n, nil
}

// ErrNoCUBIN is CompileCUBIN's error with an NVRTC older than 11.1.
var ErrNoCUBIN = errors.New("driver: this NVRTC cannot emit CUBIN (nvrtcGetCUBIN missing)")

// Path returns the file NVRTC was loaded from.
func (n *NVRTC) Path() string { return n.lib.path }

// Version returns NVRTC's CUDA version.
func (n *NVRTC) Version() (major, minor int, err error) {
	var a, b int32
	if r := n.version(&a, &b); r != 0 {
		return 0, 0, n.err("version", r, "")
	}
	return int(a), int(b), nil
}

func (n *NVRTC) err(op string, r int32, log string) error {
	return &CompileError{Op: op, Code: r, Msg: n.getErrorString(r), Log: log}
}

// Compile compiles CUDA C source to PTX with the given options (for example
// "--gpu-architecture=compute_90"). It is safe for concurrent use: every
// call has its own NVRTC program.
func (n *NVRTC) Compile(src, name string, opts []string) (ptx []byte, log string, err error) {
	// buf keeps NVRTC's trailing NUL, as cuModuleLoadData wants.
	return n.compile(src, name, opts, "ptx", n.getPTXSize, n.getPTX)
}

// CompileCUBIN compiles CUDA C source to machine code for a real
// architecture ("--gpu-architecture=sm_90"). The driver loads a CUBIN
// without its PTX JIT, so it runs where the driver is older than this
// NVRTC (same major version), which PTX does not. Safe for concurrent use.
func (n *NVRTC) CompileCUBIN(src, name string, opts []string) (cubin []byte, log string, err error) {
	if n.getCUBIN == nil {
		return nil, "", ErrNoCUBIN
	}
	return n.compile(src, name, opts, "cubin", n.getCUBINSize, n.getCUBIN)
}

func (n *NVRTC) compile(src, name string, opts []string, what string,
	getSize func(uintptr, *uint64) int32, get func(uintptr, *byte) int32) ([]byte, string, error) {
	var p uintptr
	if r := n.createProgram(&p, src, name, 0, nil, nil); r != 0 {
		return nil, "", n.err("create "+name, r, "")
	}
	defer n.destroyProgram(&p)
	// NVRTC reads the option strings during the call only; they are
	// NUL-terminated Go bytes kept alive below.
	cs := make([][]byte, len(opts))
	ptrs := make([]*byte, len(opts)+1)
	for i, o := range opts {
		cs[i] = append([]byte(o), 0)
		ptrs[i] = &cs[i][0]
	}
	r := n.compileProgram(p, int32(len(opts)), unsafe.Pointer(&ptrs[0]))
	runtime.KeepAlive(cs)
	runtime.KeepAlive(ptrs)
	log := n.programLog(p)
	if r != 0 {
		return nil, log, n.err("compile "+name, r, log)
	}
	var sz uint64
	if r := getSize(p, &sz); r != 0 || sz == 0 {
		return nil, log, n.err(what+" size", r, log)
	}
	buf := make([]byte, sz)
	if r := get(p, &buf[0]); r != 0 {
		return nil, log, n.err(what, r, log)
	}
	return buf, log, nil
}

func (n *NVRTC) programLog(p uintptr) string {
	var sz uint64
	if n.getLogSize(p, &sz) != 0 || sz <= 1 {
		return ""
	}
	b := make([]byte, sz)
	if n.getLog(p, &b[0]) != 0 {
		return ""
	}
	return strings.TrimRight(string(b), "\x00")
}
