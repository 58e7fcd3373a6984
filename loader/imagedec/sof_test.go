package imagedec

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// sofAgrees checks scanSOF against TurboJPEG's header parse of data: where
// scanSOF answers and TurboJPEG reads the header, they agree on the size
// and on whether the image is CMYK/YCCK.
func sofAgrees(t *testing.T, name string, data []byte) (scanned bool) {
	t.Helper()
	w, h, nc, ok := scanSOF(data)
	if !ok {
		return false
	}
	var d Decoder
	if err := d.turboReady(); err != nil {
		t.Fatal(err)
	}
	if err := d.tj.header(data); err != nil {
		return true // libjpeg refuses it; tjDecompress2 will too
	}
	cmyk := d.tj.colors == tjCSCMYK || d.tj.colors == tjCSYCCK
	if int(d.tj.width) != w || int(d.tj.height) != h || cmyk != (nc == 4) {
		t.Errorf("%s: scanSOF %dx%d with %d components, TurboJPEG %dx%d colour space %d",
			name, w, h, nc, d.tj.width, d.tj.height, d.tj.colors)
	}
	return true
}

// TestScanSOF: on every JPEG fixture (each subsampling, progressive,
// grey, CMYK, and the damaged ones) scanSOF agrees with TurboJPEG's header,
// and it leaves to libjpeg every header it might read differently.
func TestScanSOF(t *testing.T) {
	requireTurbo(t)
	files, _ := filepath.Glob(fixtures + "img/*.jp*g")
	bad, _ := filepath.Glob(fixtures + "bad/images/c/*.jpg")
	n := 0
	for _, f := range append(files, bad...) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if sofAgrees(t, f, data) {
			n++
		}
	}
	if n < len(files) {
		t.Errorf("scanSOF read %d of %d JPEG fixtures (all %d good ones expected)", n, len(files)+len(bad), len(files))
	}
	rgb, err := os.ReadFile(fixtures + "img/rgb.jpg")
	if err != nil {
		t.Fatal(err)
	}
	sof := bytes.Index(rgb, []byte{0xff, 0xc0})
	if sof < 0 {
		t.Fatal("rgb.jpg has no SOF0")
	}
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(rgb)) }
	for name, data := range map[string][]byte{
		"no SOI":            rgb[2:],
		"bytes before SOF":  edit(func(b []byte) []byte { return append(append(b[:sof:sof], 0x00), rgb[sof:]...) }),
		"fill bytes":        edit(func(b []byte) []byte { return append(append(b[:sof:sof], 0xff), rgb[sof:]...) }),
		"12-bit":            edit(func(b []byte) []byte { b[sof+4] = 12; return b }),
		"SOF3 (lossless)":   edit(func(b []byte) []byte { b[sof+1] = 0xc3; return b }),
		"zero height":       edit(func(b []byte) []byte { b[sof+5], b[sof+6] = 0, 0; return b }),
		"length mismatch":   edit(func(b []byte) []byte { b[sof+3]++; return b }),
		"two components":    edit(func(b []byte) []byte { b[sof+9] = 2; return b }),
		"cut in the SOF":    rgb[:sof+8],
		"SOS before SOF":    edit(func(b []byte) []byte { b[sof+1] = 0xda; return b }),
		"short segment len": edit(func(b []byte) []byte { b[4], b[5] = 0, 1; return b }),
	} {
		if w, h, nc, ok := scanSOF(data); ok {
			t.Errorf("%s: scanSOF read %dx%d, %d components; want it left to libjpeg", name, w, h, nc)
		}
	}
	// Restart and TEM markers carry no segment: skipped, as libjpeg does.
	withRST := edit(func(b []byte) []byte { return append(append(b[:sof:sof], 0xff, 0xd3, 0xff, 0x01), rgb[sof:]...) })
	if w, h, _, ok := scanSOF(withRST); !ok || !sofAgrees(t, "RST before SOF", withRST) || w == 0 || h == 0 {
		t.Errorf("RST before SOF: %dx%d, ok %v", w, h, ok)
	}
}

// FuzzScanSOF: on any bytes scanSOF agrees with TurboJPEG's header parse
// whenever both read one.
func FuzzScanSOF(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if TurboAvailable() != nil {
			t.Skip()
		}
		sofAgrees(t, "input", data)
	})
}
