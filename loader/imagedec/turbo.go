package imagedec

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// The TurboJPEG API of libjpeg-turbo 2.1 (turbojpeg.h), loaded at run time
// with purego: no cgo, and a machine without the library still decodes,
// with the Go decoder.
const (
	tjPFRGB  = 0  // TJPF_RGB
	tjPFCMYK = 11 // TJPF_CMYK

	tjCSYCbCr = 1 // TJCS_YCbCr
	tjCSCMYK  = 3 // TJCS_CMYK
	tjCSYCCK  = 4 // TJCS_YCCK

	// TJFLAG_ACCURATEDCT: the accurate integer IDCT (libjpeg's JDCT_ISLOW,
	// PIL's default). Fancy upsampling is on because TJFLAG_FASTUPSAMPLE
	// (256) is not set, as in PIL.
	tjFlagAccurateDCT = 4096
	// TJFLAG_LIMITSCANS: refuse a progressive image of more than 500
	// scans, a CPU bomb no real image is.
	tjFlagLimitScans = 32768

	tjErrWarning = 0 // TJERR_WARNING: the image was decoded, with a complaint
)

// turboLibNames are the file names tried, in order.
var turboLibNames = []string{"libturbojpeg.so.0", "libturbojpeg.so"}

// turboLib is the loaded library: the raw addresses of the functions this
// package calls. purego.SyscallN on a raw address allocates nothing when
// every pointer argument points to memory already on the heap (or outside
// Go's), which is what keeps the decode path allocation-free.
type turboLib struct {
	path                                           string
	initDecompress, decompressHeader3, decompress2 uintptr
	destroy, getErrorStr2, getErrorCode            uintptr
}

var (
	turboOnce sync.Once
	turbo     *turboLib
	turboErr  error
)

// ErrNoTurbo is the error of decoder=turbo on a machine without
// libturbojpeg.so.0 (Debian: apt-get install libturbojpeg0).
var ErrNoTurbo = errors.New("imagedec: libturbojpeg.so.0 not available (Debian: apt-get install libturbojpeg0)")

// loadTurbo loads libturbojpeg once; later calls return the same result.
// LOADERD_TURBOJPEG names the library file to use instead ("none" disables
// it, for tests of the fallback).
func loadTurbo() (*turboLib, error) {
	turboOnce.Do(func() {
		turbo, turboErr = openTurbo(os.Getenv("LOADERD_TURBOJPEG"))
		if turboErr == nil && os.Getenv("LOADERD_MALLOPT") != "0" {
			tuneMalloc()
		}
	})
	return turbo, turboErr
}

func openTurbo(override string) (*turboLib, error) {
	if runtime.GOOS != "linux" && runtime.GOOS != "freebsd" {
		return nil, fmt.Errorf("%w: not supported on %s", ErrNoTurbo, runtime.GOOS)
	}
	if override == "none" {
		return nil, fmt.Errorf("%w: disabled by LOADERD_TURBOJPEG=none", ErrNoTurbo)
	}
	var paths []string
	if override != "" {
		paths = []string{override}
	} else {
		for _, dir := range []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"} {
			for _, n := range turboLibNames {
				if p := filepath.Join(dir, n); fileExists(p) {
					paths = append(paths, p)
				}
			}
		}
		paths = append(paths, turboLibNames...) // dlopen's own search
	}
	var errs []string
	for _, p := range paths {
		h, err := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		l := &turboLib{path: p}
		if err := l.bind(h); err != nil {
			purego.Dlclose(h)
			return nil, err
		}
		return l, nil
	}
	return nil, fmt.Errorf("%w: %s", ErrNoTurbo, strings.Join(errs, "; "))
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// bind looks every function up with Dlsym first: purego.RegisterLibFunc
// panics on a missing symbol, an old or wrong library must be an error.
func (l *turboLib) bind(h uintptr) error {
	for _, s := range []struct {
		p    *uintptr
		name string
	}{
		{&l.initDecompress, "tjInitDecompress"},
		{&l.decompressHeader3, "tjDecompressHeader3"},
		{&l.decompress2, "tjDecompress2"},
		{&l.destroy, "tjDestroy"},
		{&l.getErrorStr2, "tjGetErrorStr2"},
		{&l.getErrorCode, "tjGetErrorCode"},
	} {
		p, ok := dlsym(h, s.name)
		if !ok {
			return fmt.Errorf("%w: %s lacks %s (libjpeg-turbo 2.1 or later is needed)", ErrNoTurbo, l.path, s.name)
		}
		*s.p = p
	}
	return nil
}

// turboHandle is one tjhandle with the out-parameters of its calls, kept
// on the heap so that passing their addresses to C allocates nothing.
type turboHandle struct {
	lib                         *turboLib
	h                           uintptr
	width, height, subs, colors int32
	args                        [9]uintptr
	// keep holds the buffers of the call in flight: stored here, they
	// escape to the heap (which does not move) and stay alive.
	keep [2]unsafe.Pointer
	// live is h as the cleanup that destroys it once the handle is
	// unreachable sees it: registered once, so renewing allocates nothing.
	live *uintptr
}

// newTurboHandle makes a decompressor; a runtime cleanup destroys it once
// it is unreachable (its Decoder was dropped by a sync.Pool).
func newTurboHandle(lib *turboLib) (*turboHandle, error) {
	t := &turboHandle{lib: lib, live: new(uintptr)}
	if err := t.renew(); err != nil {
		return nil, err
	}
	destroy := lib.destroy
	runtime.AddCleanup(t, func(h *uintptr) { purego.SyscallN(destroy, *h) }, t.live)
	return t, nil
}

// renew replaces the handle's decompressor with a fresh one. A failed
// TurboJPEG 2.1 call can leave libjpeg's state mid-header (the next
// header call then continues the old parse), so every failure renews.
func (t *turboHandle) renew() error {
	h, _, _ := purego.SyscallN(t.lib.initDecompress)
	if h == 0 {
		return fmt.Errorf("imagedec: tjInitDecompress failed")
	}
	if t.h != 0 {
		t.call(t.lib.destroy, t.h)
	}
	t.h, *t.live = h, h
	return nil
}

// header reads width, height, subsampling and colourspace from data's
// header: TurboJPEG's own parse, the one decompress will use.
func (t *turboHandle) header(data []byte) error {
	if len(data) == 0 {
		return fmt.Errorf("imagedec: empty JPEG")
	}
	runtime.LockOSThread() // the error text may be thread-local (below)
	defer runtime.UnlockOSThread()
	t.keep[0] = unsafe.Pointer(unsafe.SliceData(data))
	r := t.call(t.lib.decompressHeader3, t.h, uintptr(t.keep[0]), uintptr(len(data)),
		uintptr(unsafe.Pointer(&t.width)), uintptr(unsafe.Pointer(&t.height)),
		uintptr(unsafe.Pointer(&t.subs)), uintptr(unsafe.Pointer(&t.colors)))
	if int32(r) != 0 {
		return t.fail("tjDecompressHeader3")
	}
	return nil
}

// call calls fn with args through the handle's own argument array:
// purego.SyscallN's variadic slice escapes, and would be allocated per
// call if built at the call site. Every pointer among args points into
// the heap or C memory and is held in t.keep (or is t itself) until the
// call returns, so the memory stays put and alive.
func (t *turboHandle) call(fn uintptr, args ...uintptr) uintptr {
	n := copy(t.args[:], args)
	r, _, _ := purego.SyscallN(fn, t.args[:n]...)
	t.keep = [2]unsafe.Pointer{}
	return r
}

// decompress decodes data into dst, w×h pixels of pixelFormat with rows
// of pitch bytes, w and h the header's size. dst must hold pitch·h bytes:
// the caller sized it from the header, before this call. A call that
// fails with one of libjpeg's benign warnings (benignWarning) decoded the
// whole image and succeeds, as PIL does; any other failure is an error.
func (t *turboHandle) decompress(data, dst []byte, w, h, pitch, pixelFormat int) error {
	if len(dst) < pitch*h || len(data) == 0 {
		return fmt.Errorf("imagedec: turbo buffer of %d bytes for %dx%d, pitch %d", len(dst), w, h, pitch)
	}
	runtime.LockOSThread() // the error text may be thread-local (errorString)
	defer runtime.UnlockOSThread()
	t.keep = [2]unsafe.Pointer{unsafe.Pointer(unsafe.SliceData(data)), unsafe.Pointer(unsafe.SliceData(dst))}
	r := t.call(t.lib.decompress2, t.h, uintptr(t.keep[0]), uintptr(len(data)),
		uintptr(t.keep[1]), uintptr(w), uintptr(pitch), uintptr(h),
		uintptr(pixelFormat), tjFlagAccurateDCT|tjFlagLimitScans)
	if int32(r) == 0 {
		return nil
	}
	if int32(t.call(t.lib.getErrorCode, t.h)) == tjErrWarning && benignWarning(t.errorString()) {
		return t.renew()
	}
	return t.fail("tjDecompress2")
}

// benignWarning reports whether msg, the last message of a call that
// failed with TJERR_WARNING, is one of libjpeg's warnings (jerror.h's
// JWRN_*) that PIL, which ignores warnings, decodes through. TurboJPEG 2.1
// reports a fatal error that follows a warning as a warning too; then the
// text is the error's, not in this list. "Premature end of JPEG file" is
// left out: the data was cut off, and PIL refuses such a file.
func benignWarning(msg string) bool {
	for _, w := range []string{"Corrupt JPEG data", "Unknown Adobe color transform", "Inconsistent progression sequence",
		"Warning: unknown JFIF", "Invalid SOS parameters for sequential", "Application transferred too many"} {
		if strings.HasPrefix(msg, w) {
			return true
		}
	}
	return false
}

// errTurbo marks a TurboJPEG error message; decodeError classifies it.
type errTurbo struct{ op, msg string }

func (e *errTurbo) Error() string { return "libturbojpeg: " + e.op + ": " + e.msg }

// fail returns the error of the failed call op and renews the handle.
func (t *turboHandle) fail(op string) error {
	err := &errTurbo{op: op, msg: t.errorString()}
	if rerr := t.renew(); rerr != nil {
		return fmt.Errorf("%w (and %v)", err, rerr)
	}
	return err
}

// errorString copies tjGetErrorStr2's C string (bounded: it is libjpeg's
// message buffer, JMSG_LENGTH_MAX = 200 bytes). For warnings and some
// errors TurboJPEG 2.1 keeps the text in a thread-local buffer, so the
// calls that may read it hold their OS thread from the call on.
func (t *turboHandle) errorString() string {
	p := t.call(t.lib.getErrorStr2, t.h)
	if p == 0 {
		return "unknown error"
	}
	// A C pointer, never Go memory: read through a pointer to the
	// uintptr, which go vet's unsafeptr check accepts.
	b := unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&p))), 512)
	n := 0
	for n < len(b) && b[n] != 0 {
		n++
	}
	return string(b[:n])
}
