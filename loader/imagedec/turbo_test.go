package imagedec

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/internal/loadertest"
)

// requireTurbo skips a test without libturbojpeg, or fails it where
// LOADERD_REQUIRE_TURBO=1 (scripts/test.sh, which installs the library).
func requireTurbo(t testing.TB) {
	t.Helper()
	if err := TurboAvailable(); err != nil {
		if os.Getenv("LOADERD_REQUIRE_TURBO") == "1" {
			t.Fatalf("LOADERD_REQUIRE_TURBO=1: %v", err)
		}
		t.Skipf("skipped: %v", err)
	}
}

// pilPython is Debian's interpreter, the one with python3-pil.
const pilPython = "/usr/bin/python3"

// pilHashes runs testdata/pilhash.py over paths and returns its lines by
// name: "WxH\tSHA256" or "error: …\t-". It skips without PIL, or fails
// where LOADERD_REQUIRE_TURBO=1.
func pilHashes(t testing.TB, paths ...string) map[string]string {
	t.Helper()
	if err := exec.Command(pilPython, "-c", "import PIL").Run(); err != nil {
		if os.Getenv("LOADERD_REQUIRE_TURBO") == "1" {
			t.Fatalf("LOADERD_REQUIRE_TURBO=1 but %s has no PIL (scripts/python-setup.sh): %v", pilPython, err)
		}
		t.Skipf("skipped: %s has no PIL: %v", pilPython, err)
	}
	out, err := exec.Command(pilPython, append([]string{"testdata/pilhash.py"}, paths...)...).Output()
	if err != nil {
		t.Fatalf("pilhash.py: %v", err)
	}
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, rest, _ := strings.Cut(l, "\t")
		m[name] = rest
	}
	return m
}

// turboNative decodes data at its own size with the TurboJPEG backend.
func turboNative(d *Decoder, data []byte) ([]byte, int, int, error) {
	d.Backend = TurboJPEG
	if err := d.turboReady(); err != nil {
		return nil, 0, 0, err
	}
	if err := d.turboHeader(data); err != nil {
		return nil, 0, 0, err
	}
	d.H, d.W = int(d.tj.height), int(d.tj.width)
	buf := make([]byte, d.H*d.W*3)
	return buf, d.W, d.H, d.Decode(data, buf)
}

// matchPIL compares one image's TurboJPEG decode with PIL's line for it.
func matchPIL(d *Decoder, name string, data []byte, pil string) error {
	pix, w, h, err := turboNative(d, data)
	if err != nil {
		return fmt.Errorf("%s: %v", name, err)
	}
	sum := sha256.Sum256(pix)
	if got := fmt.Sprintf("%dx%d\t%s", w, h, hex.EncodeToString(sum[:])); got != pil {
		return fmt.Errorf("%s: turbo gives %s, PIL %s", name, got, pil)
	}
	return nil
}

// TestTurboMatchesPILFixtures: every JPEG fixture (4:4:4, 4:2:2, 4:2:0,
// 4:4:0, 4:1:1, 4:1:0, progressive, greyscale, CMYK) decodes to PIL's
// exact RGB bytes.
func TestTurboMatchesPILFixtures(t *testing.T) {
	requireTurbo(t)
	var files []string
	for _, pat := range []string{"*.jpg", "*.jpeg"} {
		m, _ := filepath.Glob(fixtures + "img/" + pat)
		files = append(files, m...)
	}
	pil := pilHashes(t, files...)
	var d Decoder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := matchPIL(&d, f, data, pil[f]); err != nil {
			t.Error(err)
		}
	}
	if len(files) < 9 {
		t.Fatalf("only %d JPEG fixtures", len(files))
	}
}

// TestTurboMatchesPILCIFAR decodes all 50,000 JPEGs of the shared
// CIFAR-10 tar and compares each image's RGB bytes with PIL's (by
// SHA-256): not one value may differ.
func TestTurboMatchesPILCIFAR(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short: decodes 50,000 images twice")
	}
	requireTurbo(t)
	path := loadertest.CIFARJPEGTar(t)
	checkTarAgainstPIL(t, path, 50000)
}

// TestTurboMatchesPILLarge: the same over the large-image set (3,000
// ImageNet-sized photographs: 4:4:4, 4:2:2, 4:2:0, progressive and
// greyscale files; scripts/make-large-images.py).
func TestTurboMatchesPILLarge(t *testing.T) {
	if raceEnabled { // an exhaustive sweep on one goroutine: the run without -race has it
		t.Skip("skipped under -race: an exhaustive sweep with nothing concurrent to check (5 minutes under the detector)")
	}
	if testing.Short() {
		t.Skip("skipped in -short: decodes 3,000 large images twice")
	}
	requireTurbo(t)
	subs := checkTarAgainstPIL(t, loadertest.LargeImagesTar(t), 3000)
	// TJSAMP_444, 422, 420 and GRAY: the set holds every kind.
	for _, k := range []int32{0, 1, 2, 3} {
		if subs[k] == 0 {
			t.Errorf("no image of TurboJPEG subsampling %d in the set (%v)", k, subs)
		}
	}
}

// checkTarAgainstPIL decodes every image member of a tar with TurboJPEG
// and compares with PIL, running PIL at the same time. It returns how
// many images had each TurboJPEG subsampling (TJSAMP_*).
func checkTarAgainstPIL(t *testing.T, path string, want int) map[int32]int {
	t.Helper()
	pilc := make(chan map[string]string, 1)
	go func() { pilc <- pilHashesNoSkip(t, path) }()
	type img struct {
		name string
		sum  string
	}
	var got []img
	var d Decoder
	subs := map[int32]int{}
	eachTarImage(t, path, func(name string, data []byte) bool {
		pix, w, hh, err := turboNative(&d, data)
		if err != nil {
			t.Fatalf("%s(%s): %v", path, name, err)
		}
		// TurboJPEG's own header parse: the subsampling, and scanSOF's
		// agreement with it on every image.
		if err := d.tj.header(data); err != nil {
			t.Fatalf("%s(%s): %v", path, name, err)
		}
		if int(d.tj.width) != w || int(d.tj.height) != hh {
			t.Fatalf("%s(%s): decoded as %dx%d, TurboJPEG's header says %dx%d", path, name, w, hh, d.tj.width, d.tj.height)
		}
		subs[d.tj.subs]++
		sum := sha256.Sum256(pix)
		got = append(got, img{name, fmt.Sprintf("%dx%d\t%s", w, hh, hex.EncodeToString(sum[:]))})
		return true
	})
	pil := <-pilc
	if pil == nil {
		t.FailNow()
	}
	differ := 0
	for _, g := range got {
		if pil[g.name] != g.sum {
			if differ++; differ <= 5 {
				t.Errorf("%s(%s): turbo %s, PIL %s", path, g.name, g.sum, pil[g.name])
			}
		}
	}
	if differ > 0 || len(got) != want || len(pil) != want {
		t.Fatalf("%d of %d images differ from PIL's (PIL read %d, want %d)", differ, len(got), len(pil), want)
	}
	t.Logf("%d images, every RGB byte equal to PIL's; subsamplings %v", len(got), subs)
	return subs
}

// pilHashesNoSkip is pilHashes for a goroutine: it reports a failure with
// Errorf and returns nil.
func pilHashesNoSkip(t *testing.T, paths ...string) map[string]string {
	if err := exec.Command(pilPython, "-c", "import PIL").Run(); err != nil {
		t.Errorf("%s has no PIL (scripts/python-setup.sh): %v", pilPython, err)
		return nil
	}
	out, err := exec.Command(pilPython, append([]string{"testdata/pilhash.py"}, paths...)...).Output()
	if err != nil {
		t.Errorf("pilhash.py: %v", err)
		return nil
	}
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, rest, _ := strings.Cut(l, "\t")
		m[name] = rest
	}
	return m
}

// TestTurboAllocs: the TurboJPEG path allocates nothing per image once a
// pool's decoder exists, at the dataset's size and resized.
func TestTurboAllocs(t *testing.T) {
	requireTurbo(t)
	data, err := os.ReadFile(fixtures + "img/shapes.q50.420.jpeg")
	if err != nil {
		t.Fatal(err)
	}
	h, w, err := Size(data, DefaultMaxPixels)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		h, w   int
		resize bool
	}{{h, w, false}, {32, 32, true}} {
		scratch := make([]byte, c.h*c.w*3)
		d := &Decoder{H: c.h, W: c.w, Resize: c.resize, Backend: TurboJPEG}
		if err := d.Decode(data, scratch); err != nil {
			t.Fatal(err)
		}
		if n := allocsPerRun(100, func() { d.Decode(data, scratch) }); n != 0 {
			t.Errorf("%dx%d: %v allocations per TurboJPEG decode, want 0", c.w, c.h, n)
		}
		if raceEnabled {
			continue
		}
		p := NewPool(c.h, c.w, DefaultMaxPixels, c.resize).WithBackend(TurboJPEG)
		if _, err := p.Decode(data, scratch); err != nil {
			t.Fatal(err)
		}
		if n := allocsPerRun(100, func() { p.Decode(data, scratch) }); n != 0 {
			t.Errorf("%dx%d: %v allocations per TurboJPEG decode through a pool, want 0", c.w, c.h, n)
		}
	}
}

// TestTurboErrors: damaged input is an error wrapping the right sentinel;
// an oversized or wrong-sized header is refused before decoding.
func TestTurboErrors(t *testing.T) {
	requireTurbo(t)
	data, err := os.ReadFile(fixtures + "img/shapes.q50.420.jpeg")
	if err != nil {
		t.Fatal(err)
	}
	h, w, _ := Size(data, DefaultMaxPixels)
	d := &Decoder{H: h, W: w, Backend: TurboJPEG}
	dst := make([]byte, h*w*3)
	for _, c := range []struct {
		name string
		data []byte
		max  int64
		want error
	}{
		{"truncated", data[:len(data)/2], 0, loader.ErrTruncated},
		{"header only", data[:200], 0, loader.ErrTruncated},
		{"garbage after SOI", append(append([]byte{0xff, 0xd8, 0xff}, bytes.Repeat([]byte{0x55}, 100)...), 0xff, 0xd9), 0, loader.ErrCorrupt},
		{"damaged scan", loadertest.Fixture(t, "bad/images/c/corrupt.jpg"), 0, loader.ErrCorrupt},
		{"cut in the tables", loadertest.Fixture(t, "bad/images/c/truncated.jpg"), 0, loader.ErrTruncated},
		{"too many pixels", data, int64(h*w) - 1, ErrTooLarge},
	} {
		d.MaxPixels, d.Resize = c.max, true
		if err := d.Decode(c.data, dst); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	d.MaxPixels, d.Resize = 0, false
	d.W++
	if err := d.Decode(data, make([]byte, h*d.W*3)); !errors.Is(err, ErrSize) {
		t.Errorf("wrong size: %v, want ErrSize", err)
	}
}

func TestChooseBackend(t *testing.T) {
	if b, err := ChooseBackend("go"); b != GoJPEG || err != nil {
		t.Errorf("go: %v %v", b, err)
	}
	if _, err := ChooseBackend("libjpeg"); err == nil {
		t.Error("decoder=libjpeg accepted")
	}
	b, err := ChooseBackend("")
	if TurboAvailable() == nil && (b != TurboJPEG || err != nil) || TurboAvailable() != nil && (b != GoJPEG || err != nil) {
		t.Errorf("default: %v %v (turbo: %v)", b, err, TurboAvailable())
	}
	if _, err := ChooseBackend("turbo"); (err == nil) != (TurboAvailable() == nil) {
		t.Errorf("turbo: %v (turbo: %v)", err, TurboAvailable())
	}
	for _, p := range []string{"none", "/nonexistent/libturbojpeg.so.0", "libc.so.6"} {
		if _, err := openTurbo(p); !errors.Is(err, ErrNoTurbo) {
			t.Errorf("openTurbo(%q): %v, want ErrNoTurbo", p, err)
		}
	}
}

// FuzzTurboDecode: whatever the bytes, the TurboJPEG decoder returns an
// error wrapping a sentinel or fills the buffer; never a crash (libjpeg
// is C: a bad size check would corrupt memory here).
func FuzzTurboDecode(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if TurboAvailable() != nil {
			t.Skip()
		}
		d := &Decoder{H: 32, W: 32, MaxPixels: 1 << 20, Resize: true, Backend: TurboJPEG}
		dst := make([]byte, 32*32*3)
		if err := d.Decode(data, dst); err != nil && !sentinel(err) {
			t.Fatalf("error wraps no sentinel: %v", err)
		}
		d.Resize = false
		if err := d.Decode(data, dst); err != nil && !sentinel(err) {
			t.Fatalf("error wraps no sentinel: %v", err)
		}
	})
}
