package imagedec

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/loaderd/loaderd/client/sample"
)

// Decode and crop in one (DALI's ImageRandomCrop on the CPU): a random
// resized crop reads on average half of a photograph, and libjpeg's own
// API (libjpeg.so.62 of libjpeg-turbo, the library PIL links) decodes
// only that: jpeg_skip_scanlines entropy-decodes the rows above the crop
// without the IDCT, upsampling or colour conversion, jpeg_crop_scanline
// limits those to the crop's iMCU columns, and the rows below it are not
// read at all. TurboJPEG 2.1 has no cropping call (TurboJPEG 3's
// tj3SetCroppingRegion is newer than Debian's).
//
// The pixels are the full decode's: libjpeg treats the cropped columns'
// edges as image edges when upsampling chroma, so the decoded columns
// reach cropMargin pixels past the box on either side (rows need no
// margin: skipping keeps the upsampler's context rows), and
// TestCropMatchesFullDecode holds every large-image box to the full
// decode's bytes. Only sequential single-scan files of one or three
// components take this path. Progressive files, whose every scan libjpeg
// decodes before the first row, go to jpegx's DecodeRGBCrop
// (all scans read and checked, only the box's blocks transformed and
// converted). CMYK and any file libjpeg or jpegx errs or warns on go
// through the full decode, which keeps PIL's acceptance rules and error
// messages. A sequential file damaged below the crop is therefore decoded
// without complaint when the crop does not reach the damage: the batch
// holds nothing of it.

// cropMargin is the columns decoded beyond the box on either side: one
// iMCU of a 4:2:0 or 4:2:2 image.
const cropMargin = 16

// The libjpeg 6.2 ABI of libjpeg-turbo on 64-bit Linux (jpeglib.h,
// JPEG_LIB_VERSION 62): struct sizes, the fields this file touches and
// their offsets. jpeg_CreateDecompress checks the struct size.
const (
	cinfoSize  = 632
	jerrSize   = 168
	jpegLibVer = 62

	offErr, offSrc                       = 0, 40
	offWidth, offHeight                  = 48, 52
	offNumComp, offColorSpace            = 56, 60
	offOutColor, offScaleNum, offScaleDe = 64, 68, 72
	offBuffered, offRawOut, offDCT       = 88, 92, 96
	offFancy, offSmooth, offQuantize     = 100, 104, 108
	offOutWidth, offOutHeight            = 136, 140
	offScanline, offProgressive          = 168, 312
	offCompsInScan                       = 432

	offErrorExit, offOutputMessage, offFormatMessage = 0, 16, 24
	offNumWarnings                                   = 128

	jcsGray, jcsRGB, jcsYCbCr = 1, 2, 3
	jpegHeaderOK              = 1
	cropRows                  = 16 // rows per jpeg_read_scanlines call
)

// cropLib is libjpeg.so.62: the functions' addresses and the callbacks
// that replace libjpeg's error exit (which would call exit()) and its
// message printer.
type cropLib struct {
	path                                                 string
	stdError, create, destroy, memSrc, readHeader, start uintptr
	crop, skip, read, abort                              uintptr
	errorExit, silent                                    uintptr
}

var (
	cropOnce sync.Once
	cropL    *cropLib
	cropErr  error
)

// errNoCrop is returned when libjpeg.so.62 is missing or refused; the
// decoder then decodes whole images.
var errNoCrop = errors.New("imagedec: libjpeg.so.62 (libjpeg-turbo's libjpeg API) not available")

// libjpegPanic is what the error-exit callback panics with: the Go
// runtime unwinds the C frames between it and the call into libjpeg, as
// libjpeg's own longjmp recovery would, and the caller recovers it.
type libjpegPanic struct{}

// loadCrop loads libjpeg.so.62 once. LOADERD_CROPDECODE=off disables
// decode-and-crop (every image decoded whole, for comparing).
func loadCrop() (*cropLib, error) {
	cropOnce.Do(func() {
		if os.Getenv("LOADERD_CROPDECODE") == "off" {
			cropErr = fmt.Errorf("%w: disabled by LOADERD_CROPDECODE=off", errNoCrop)
			return
		}
		cropL, cropErr = openCrop()
	})
	return cropL, cropErr
}

func openCrop() (*cropLib, error) {
	var names []string
	for _, dir := range []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"} {
		if p := filepath.Join(dir, "libjpeg.so.62"); fileExists(p) {
			names = append(names, p)
		}
	}
	h, name, err := dlopenFirst(append(names, "libjpeg.so.62"))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNoCrop, err)
	}
	l := &cropLib{path: name}
	for _, s := range []struct {
		p    *uintptr
		name string
	}{
		{&l.stdError, "jpeg_std_error"}, {&l.create, "jpeg_CreateDecompress"},
		{&l.destroy, "jpeg_destroy_decompress"}, {&l.memSrc, "jpeg_mem_src"},
		{&l.readHeader, "jpeg_read_header"}, {&l.start, "jpeg_start_decompress"},
		{&l.crop, "jpeg_crop_scanline"}, {&l.skip, "jpeg_skip_scanlines"},
		{&l.read, "jpeg_read_scanlines"}, {&l.abort, "jpeg_abort_decompress"},
	} {
		p, ok := dlsym(h, s.name)
		if !ok {
			// IJG's libjpeg 6b has neither crop nor skip: not libjpeg-turbo.
			return nil, fmt.Errorf("%w: %s lacks %s", errNoCrop, name, s.name)
		}
		*s.p = p
	}
	l.errorExit = purego.NewCallback(func(uintptr) { panic(libjpegPanic{}) })
	l.silent = purego.NewCallback(func(uintptr) {})
	return l, nil
}

// cropHandle is one libjpeg decompressor.
type cropHandle struct {
	*cropMem
	args [4]uintptr
	lib  *cropLib
	buf  []byte // cropRows decoded rows
	live bool   // jpeg_CreateDecompress succeeded
}

// cropMem is what libjpeg reads and writes: Go memory without Go
// pointers (libjpeg stores C pointers there), on the heap, which does not
// move. It is apart from cropHandle so that the cleanup destroying the
// decompressor keeps it alive until it has run.
type cropMem struct {
	cinfo [cinfoSize / 8]uint64
	jerr  [jerrSize / 8]uint64
	xoff  uint32 // jpeg_crop_scanline's in-out parameters
	width uint32
	rows  [cropRows]uintptr // row pointers into cropHandle.buf
}

func (c *cropHandle) u32(off int) *uint32 {
	return (*uint32)(unsafe.Add(unsafe.Pointer(&c.cinfo), off))
}

func (c *cropHandle) ptr() uintptr { return uintptr(unsafe.Pointer(&c.cinfo)) }

// run calls libjpeg's fn through the handle's argument array (purego's
// variadic slice would otherwise be allocated per call). A libjpeg error
// panics out of it (the error_exit callback): run it under recoverError.
func (c *cropHandle) run(fn uintptr, args ...uintptr) uintptr {
	n := copy(c.args[:], args)
	r, _, _ := purego.SyscallN(fn, c.args[:n]...)
	return r
}

// call is run for one call on its own, reporting whether it returned
// rather than failing.
func (c *cropHandle) call(fn uintptr, args ...uintptr) (r uintptr, ok bool) {
	defer c.recoverError(&ok)
	return c.run(fn, args...), true
}

// recoverError, deferred, turns a libjpeg error unwound to its caller
// into *ok = false and resets the decompressor for the next image; any
// other panic goes on.
func (c *cropHandle) recoverError(ok *bool) {
	p := recover()
	if p == nil {
		return
	}
	if _, is := p.(libjpegPanic); !is {
		panic(p)
	}
	*ok = false
	if c.live {
		c.run(c.lib.abort, c.ptr())
	}
}

// newCropHandle makes a decompressor with the callbacks in place of
// libjpeg's exit and printing.
func newCropHandle(l *cropLib) (*cropHandle, error) {
	c := &cropHandle{lib: l, cropMem: new(cropMem)}
	jerr := uintptr(unsafe.Pointer(&c.jerr))
	if _, ok := c.call(l.stdError, jerr); !ok {
		return nil, fmt.Errorf("%w: jpeg_std_error failed", errNoCrop)
	}
	*(*uintptr)(unsafe.Add(unsafe.Pointer(&c.jerr), offErrorExit)) = l.errorExit
	*(*uintptr)(unsafe.Add(unsafe.Pointer(&c.jerr), offOutputMessage)) = l.silent
	*(*uintptr)(unsafe.Pointer(&c.cinfo)) = jerr // cinfo.err, set before create
	if _, ok := c.call(l.create, c.ptr(), jpegLibVer, cinfoSize); !ok {
		return nil, fmt.Errorf("%w: jpeg_CreateDecompress refused the 6.2 ABI (struct of %d bytes)", errNoCrop, cinfoSize)
	}
	c.live = true
	destroy := l.destroy
	runtime.AddCleanup(c, func(m *cropMem) { purego.SyscallN(destroy, uintptr(unsafe.Pointer(&m.cinfo))) }, c.cropMem)
	return c, nil
}

// decode decodes the box of the w×h image in data into dst, box.W·box.H·3
// bytes of RGB. It reports false, with dst undefined, when the file is
// not one it takes (see above) or libjpeg erred or warned: decode the
// whole image instead.
func (c *cropHandle) decode(data, dst []byte, w, h int, box sample.Box) (ok bool) {
	bx, by, bw, bh := int(box.X), int(box.Y), int(box.W), int(box.H)
	if len(data) == 0 || len(dst) != bw*bh*3 || bx < 0 || by < 0 || bw <= 0 || bh <= 0 || bx+bw > w || by+bh > h ||
		!ownTables(data) {
		return false // (a file using an earlier image's tables: see ownTables)
	}
	l, p := c.lib, c.ptr()
	// However it ends, the decompressor goes back to its state after
	// creation (jpeg_abort_decompress: the rows below the box are never
	// read); a libjpeg error unwinds to recoverError.
	defer c.run(l.abort, p)
	defer c.recoverError(&ok)
	c.run(l.memSrc, p, uintptr(unsafe.Pointer(unsafe.SliceData(data))), uintptr(len(data)))
	if int32(c.run(l.readHeader, p, 1)) != jpegHeaderOK {
		return false
	}
	nc, cs := *c.u32(offNumComp), *c.u32(offColorSpace)
	if int(*c.u32(offWidth)) != w || int(*c.u32(offHeight)) != h || *c.u32(offProgressive) != 0 ||
		*c.u32(offCompsInScan) != nc || !(nc == 1 && cs == jcsGray || nc == 3 && (cs == jcsYCbCr || cs == jcsRGB)) {
		return false
	}
	// TurboJPEG's settings for TJPF_RGB with TJFLAG_ACCURATEDCT, PIL's.
	*c.u32(offOutColor) = jcsRGB
	*c.u32(offScaleNum), *c.u32(offScaleDe) = 1, 1
	*c.u32(offDCT) = 0 // JDCT_ISLOW
	*c.u32(offFancy), *c.u32(offSmooth) = 1, 1
	*c.u32(offBuffered), *c.u32(offRawOut), *c.u32(offQuantize) = 0, 0, 0
	c.run(l.start, p)
	if int(*c.u32(offOutWidth)) != w || int(*c.u32(offOutHeight)) != h {
		return false
	}
	x0, x1 := max(bx-cropMargin, 0), min(bx+bw+cropMargin, w)
	c.xoff, c.width = uint32(x0), uint32(x1-x0)
	if x0 > 0 || x1 < w {
		c.run(l.crop, p, uintptr(unsafe.Pointer(&c.xoff)), uintptr(unsafe.Pointer(&c.width)))
	}
	xo, cw := int(c.xoff), int(c.width)
	if xo > bx || xo+cw < bx+bw || xo+cw > w {
		return false
	}
	if by > 0 && int(c.run(l.skip, p, uintptr(by))) != by {
		return false
	}
	if cap(c.buf) < cropRows*cw*3 {
		c.buf = make([]byte, cropRows*cw*3)
	}
	for i := range c.rows {
		c.rows[i] = uintptr(unsafe.Pointer(&c.buf[i*cw*3]))
	}
	for y := by; y < by+bh; {
		n := min(cropRows, by+bh-y)
		r := int(c.run(l.read, p, uintptr(unsafe.Pointer(&c.rows)), uintptr(n)))
		if r == 0 || r > n || int(*c.u32(offScanline)) != y+r {
			return false
		}
		for k := range r {
			copy(dst[(y-by+k)*bw*3:(y-by+k+1)*bw*3], c.buf[k*cw*3+(bx-xo)*3:])
		}
		y += r
	}
	return *(*int64)(unsafe.Add(unsafe.Pointer(&c.jerr), offNumWarnings)) == 0
}

// decodeCrop decodes only box of the w×h JPEG in data into dst (box.W ·
// box.H · 3 bytes) and reports whether it did; when not, decode the whole
// image. The first call makes the decoder's libjpeg handle; without
// libjpeg.so.62 every later call returns false at once.
func (d *Decoder) decodeCrop(data, dst []byte, w, h int, box sample.Box) bool {
	if isProgressive(data) {
		// libjpeg decodes every scan before the first row, so only the
		// output stage could shrink: jpegx's (progressive.go there).
		return d.jxOn() && w*h <= progMaxPixels &&
			d.jx.DecodeRGBCrop(data, dst, int(box.X), int(box.Y), int(box.W), int(box.H)) == nil
	}
	if d.cropOff {
		return false
	}
	if d.crop == nil {
		lib, err := loadCrop()
		if err == nil {
			d.crop, err = newCropHandle(lib)
		}
		if err != nil {
			d.cropOff = true
			return false
		}
	}
	return d.crop.decode(data, dst, w, h, box)
}
