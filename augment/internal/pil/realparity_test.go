package pil

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// The real image sets, as the loader's tests find them
// (loader/internal/loadertest): the CIFAR-10 training split as JPEGs,
// shared beside the checkout, and the large-image set that
// scripts/make-large-images.py makes in the user's cache directory.
const (
	realCIFARTar   = "../../../../shared/data/cifar10-train-jpg.tar"
	realLargeTar   = "large-images-v1.tar"
	realLargeMaker = "../../../scripts/make-large-images.py"
)

// How many images of each set the test takes (see testdata/tvreal.py):
// CIFAR images at their 32x32; large images cut to their central
// 224x224, the last a greyscale JPEG, and the first of them also whole,
// downscaled to at most 512 pixels on its longer side.
const (
	realCIFARCount = 64
	realLargeCount = 16
)

// TestTorchvisionParityReal holds every operation to torchvision 0.14 on
// PIL images (Pillow 9.4) on real photographs: the CIFAR-10 JPEGs and
// the large-image set, which the synthetic patterns of
// TestTorchvisionParity may not represent (smooth skies, saturated
// colours, clipped highlights, greyscale JPEGs). testdata/tvreal.py
// decodes the JPEGs with PIL and writes the pixels, so both sides start
// from the same bytes; testdata/tvpil.py applies torchvision's
// functional ops. Each image gets every operation with a few parameters,
// cycling through the synthetic test's lists from image to image, and
// ApplyOp gets every AutoAugment operation at two magnitudes of the
// tables per image.
//
// It logs a table, one line per image set and operation: cases, values
// compared, values differing, their share and the largest difference.
// The tolerance is the package's: zero everywhere but GaussianBlur, which
// may differ by one level on at most 1% of the values of a set. Run it
// with
//
//	go test -run TestTorchvisionParityReal -v ./augment/internal/pil/
//
// It skips under -short, under qemu-user (LOADERD_QEMU_USER: arm64's
// arithmetic is held to torchvision by the synthetic cases, in a third of
// the time), without torchvision, and without both sets (a
// set that is absent is left out of the table; LOADERD_REQUIRE_TURBO=1
// makes the large set's absence a failure, as in the loader's tests).
func TestTorchvisionParityReal(t *testing.T) {
	if testing.Short() {
		t.Skip("runs torchvision on real images")
	}
	if os.Getenv("LOADERD_QEMU_USER") != "" {
		t.Skip("under qemu-user: the synthetic parity cases hold arm64's arithmetic")
	}
	if err := exec.Command(torchvisionPython, "-c", "import torchvision, PIL, numpy").Run(); err != nil {
		t.Skipf("no torchvision at %s: %v", torchvisionPython, err)
	}
	start := time.Now()
	cifar := realCIFARTar
	if _, err := os.Stat(cifar); err != nil {
		t.Logf("CIFAR set left out: %s is absent (the real CIFAR-10 JPEGs; see ../shared/data/README.md)", cifar)
		cifar = "-"
	}
	large, err := realLargeImages()
	if err != nil {
		if os.Getenv("LOADERD_REQUIRE_TURBO") == "1" {
			t.Fatalf("LOADERD_REQUIRE_TURBO=1: %v", err)
		}
		t.Logf("large set left out: %v", err)
		large = "-"
	}
	if cifar == "-" && large == "-" {
		t.Skip("neither real image set is here")
	}
	dir := t.TempDir()
	cmd := exec.Command(torchvisionPython, filepath.Join("testdata", "tvreal.py"), dir,
		cifar, fmt.Sprint(realCIFARCount), large, fmt.Sprint(realLargeCount))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tvreal.py: %v\n%s", err, out)
	}
	var images []struct {
		Set, Member, In string
		H, W, C         int
	}
	js, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(js, &images); err != nil {
		t.Fatal(err)
	}
	s := &caseSet{t: t, dir: dir, srcs: map[string][]byte{}}
	var sets []string // the image set of each case
	count := map[string]int{}
	r := rand.New(rand.NewPCG(28, 29))
	for _, im := range images {
		pix, err := os.ReadFile(filepath.Join(dir, im.In))
		if err != nil {
			t.Fatal(err)
		}
		if len(pix) != im.H*im.W*im.C {
			t.Fatalf("%s: %d bytes for %dx%dx%d", im.In, len(pix), im.H, im.W, im.C)
		}
		s.srcs[im.In] = pix
		addRealCases(s, r, im.In, im.H, im.W, im.C, count[im.Set])
		count[im.Set]++
		for len(sets) < len(s.cases) {
			sets = append(sets, im.Set)
		}
	}
	runOracle(t, dir, s.cases)
	oracleDone := time.Since(start)

	var tl tally[[2]string]
	var mu sync.Mutex
	failed := 0
	// The Go side, on every core: the large cases are a few hundred
	// megabytes of pixels.
	var wg sync.WaitGroup
	next := make(chan int)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := range next {
				pc := s.cases[i]
				outC := pc.outC
				if outC == 0 {
					outC = pc.C
				}
				src := Image{Pix: s.srcs[pc.In], H: pc.H, W: pc.W, C: pc.C}
				dst := Image{Pix: make([]byte, pc.H*pc.W*outC), H: pc.H, W: pc.W, C: outC}
				pc.run(dst, src)
				want, err := os.ReadFile(filepath.Join(dir, pc.Out))
				if err != nil {
					t.Error(err)
					continue
				}
				if len(want) != len(dst.Pix) {
					t.Errorf("%s: %d bytes, torchvision %d", pc.name, len(dst.Pix), len(want))
					continue
				}
				diff, maxd := diffBytes(dst.Pix, want)
				mu.Lock()
				tl.add([2]string{sets[i], pc.key()}, len(want), diff, maxd)
				if maxd > pc.tol {
					failed++
					if failed <= 40 {
						t.Errorf("%s (%s): %d of %d values differ, by up to %d (tolerance %d)", pc.name, sets[i], diff, len(want), maxd, pc.tol)
					}
				}
				mu.Unlock()
			}
		})
	}
	for i := range s.cases {
		next <- i
	}
	close(next)
	wg.Wait()

	keys := tl.keys
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	t.Logf("images: %v", count)
	t.Logf("%-10s %-24s %6s %11s %8s %9s %4s", "set", "op", "cases", "values", "differ", "share", "max")
	for _, k := range keys {
		st := tl.stats[k]
		share := float64(st.diff) / float64(st.values)
		t.Logf("%-10s %-24s %6d %11d %8d %9.2g %4d", k[0], k[1], st.cases, st.values, st.diff, share, st.maxd)
		if strings.HasPrefix(k[1], "gaussian_blur") && share > 0.01 {
			t.Errorf("%s %s: %d of %d values differ (%.2g%%), more than 1%%", k[0], k[1], st.diff, st.values, 100*share)
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d cases differ from torchvision", failed, len(s.cases))
	}
	t.Logf("%d cases; oracle %.1f s, total %.1f s", len(s.cases), oracleDone.Seconds(), time.Since(start).Seconds())
}

// realLargeImages returns the large-image set's path, making it with
// scripts/make-large-images.py on first use, as
// loader/internal/loadertest.MakeLargeImages does.
func realLargeImages() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	dir = filepath.Join(dir, "loaderd")
	p := filepath.Join(dir, realLargeTar)
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if out, err := exec.Command(torchvisionPython, realLargeMaker, p).CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s: %v: %s (scripts/jpeg-setup.sh installs what it needs)", realLargeMaker, err, out)
	}
	return p, nil
}

// runOracle runs testdata/tvpil.py on the cases, split between two
// processes.
func runOracle(t *testing.T, dir string, cases []parityCase) {
	const procs = 2
	var wg sync.WaitGroup
	errs := make([]error, procs)
	for p := range procs {
		sub := filepath.Join(dir, fmt.Sprint("oracle", p))
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		var ocs []oracleCase
		for i := p; i < len(cases); i += procs {
			oc := cases[i].oracleCase
			// Absolute names: os.path.join keeps them.
			oc.In, oc.Out = filepath.Join(dir, oc.In), filepath.Join(dir, oc.Out)
			ocs = append(ocs, oc)
		}
		js, err := json.Marshal(ocs)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sub, "cases.json"), js, 0o644); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			out, err := exec.Command(torchvisionPython, filepath.Join("testdata", "tvpil.py"), sub).CombinedOutput()
			if err != nil {
				errs[p] = fmt.Errorf("tvpil.py: %v\n%s", err, out)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// addRealCases registers the cases of one real image, the k-th of its
// set: each operation with a few parameters, which cycle with k through
// the lists of the synthetic test.
func addRealCases(s *caseSet, r *rand.Rand, in string, h, w, c, k int) {
	pickF := func(list []float64, j int) float64 { return list[(k*3+j*5)%len(list)] }
	fillFor := func(j int) []uint8 {
		f := fills[(k+j)%len(fills)]
		if len(f) == 3 && c == 1 {
			return f[:1]
		}
		return f
	}
	type enh struct {
		op string
		f  func(dst, src Image, factor float64)
	}
	for _, e := range []enh{{"brightness", Brightness}, {"contrast", Contrast}, {"saturation", Saturation}, {"sharpness", Sharpness}} {
		for j := range 3 {
			f := pickF(factors, j)
			s.add(in, h, w, c, e.op, map[string]any{"factor": f}, 0, 0, func(d, src Image) { e.f(d, src, f) })
		}
	}
	for j := range 2 {
		f := pickF(hueFactors, j)
		s.add(in, h, w, c, "hue", map[string]any{"factor": f}, 0, 0, func(d, src Image) { Hue(d, src, f) })
	}
	for _, oc := range []int{1, 3} {
		s.add(in, h, w, c, "grayscale", map[string]any{"channels": oc}, oc, 0, Grayscale)
	}
	for j := range 2 {
		bits := (k*3 + j*5) % 9
		s.add(in, h, w, c, "posterize", map[string]any{"bits": bits}, 0, 0, func(d, src Image) { Posterize(d, src, bits) })
	}
	for j := range 2 {
		th := pickF([]float64{0, 1, 64.5, 128, 200, 255, 256}, j)
		s.add(in, h, w, c, "solarize", map[string]any{"threshold": th}, 0, 0, func(d, src Image) { Solarize(d, src, th) })
	}
	s.add(in, h, w, c, "autocontrast", nil, 0, 0, AutoContrast)
	s.add(in, h, w, c, "equalize", nil, 0, 0, Equalize)
	s.add(in, h, w, c, "invert", nil, 0, 0, Invert)

	for j := range 2 {
		a := pickF([]float64{90, 180, 270, -90, 45, -30.5, 13.7, 720.25, 359.9999}, j)
		fill := fillFor(j)
		s.add(in, h, w, c, "rotate", map[string]any{"angle": a, "fill": fill}, 0, 0,
			func(d, src Image) { Rotate(d, src, a, fill) })
	}
	angles := []float64{0, 30, -45, 90, 12.5}
	translates := [][2]float64{{0, 0}, {3, -5}, {-7, 2}, {2.5, -1.25}}
	scales := []float64{1, 0.8, 1.3}
	shears := [][2]float64{{0, 0}, {10, 0}, {0, -15}, {5, 7}}
	for j := range 2 {
		a := angles[r.IntN(len(angles))]
		tr := translates[r.IntN(len(translates))]
		sc := scales[r.IntN(len(scales))]
		sh := shears[r.IntN(len(shears))]
		fill := fillFor(j + 1)
		p := map[string]any{"angle": a, "translate": tr, "scale": sc, "shear": sh, "fill": fill}
		s.add(in, h, w, c, "affine", p, 0, 0,
			func(d, src Image) { Affine(d, src, a, tr, sc, sh, nil, fill) })
	}
	kernels := [][2]int{{3, 3}, {5, 3}, {9, 9}, {23, 23}}
	sigmas := [][2]float64{{1, 1}, {0.5, 2}, {2.5, 0.8}, {5, 5}}
	for j := range 2 {
		kern, sg := kernels[(k+2*j)%len(kernels)], sigmas[(k/2+j)%len(sigmas)]
		s.add(in, h, w, c, "gaussian_blur", map[string]any{"kernel": kern, "sigma": sg}, 0, 1,
			func(d, src Image) { GaussianBlur(d, src, kern, sg, make([]float32, BlurScratch(src))) })
	}

	for op := range numOps {
		mags := magnitudes(op, h, w, false)
		for j := range min(2, len(mags)) {
			m := mags[(k*7+j*len(mags)/2)%len(mags)]
			fill := fillFor(j)
			p := map[string]any{"name": op.String(), "magnitude": m, "fill": fill}
			s.add(in, h, w, c, "apply_op", p, 0, 0, func(d, src Image) { ApplyOp(d, src, op, m, fill) })
		}
	}
}
