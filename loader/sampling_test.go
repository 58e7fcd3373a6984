package loader_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/sampler"
)

// skewed is the synthetic dataset of N samples
// relabelled so that its four classes hold about 80, 15, 4 and 1 percent
// of it, in stretches of index order.
type skewed struct{ loader.Wrapper }

func skewedLabel(i, n int64) int32 {
	switch p := i * 100 / n; {
	case p < 80:
		return 0
	case p < 95:
		return 1
	case p < 99:
		return 2
	}
	return 3
}

func (s *skewed) Classes() []string { return []string{"a", "b", "c", "d"} }

func (s *skewed) Sample(i int64, scratch []byte) (int32, []byte, error) {
	_, pix, err := s.Wrapper.Sample(i, scratch)
	return skewedLabel(i, s.Len()), pix, err
}

// openSkewed opens the synthetic dataset of n samples, relabelled by
// skewedLabel, with the sampler options in query.
func openSkewed(t *testing.T, n int, query string) loader.Source {
	t.Helper()
	src, err := loader.Open("synthetic:" + strconv.Itoa(n))
	if err != nil {
		t.Fatal(err)
	}
	s, err := loader.OpenSampler(&skewed{loader.Wrap(src)}, query)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// npy returns a .npy file (format version 1.0) of a 1-D array: descr
// '<f4' or '<f8', vals encoded as it says, shape (n,).
func npy(descr string, n int, vals []float64) []byte {
	h := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%d,), }", descr, n)
	h += strings.Repeat(" ", 63-(10+len(h))%64) + "\n"
	b := append([]byte("\x93NUMPY\x01\x00"), byte(len(h)), byte(len(h)>>8))
	b = append(b, h...)
	for _, v := range vals {
		if descr == "<f4" {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(v)))
		} else {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		}
	}
	return b
}

func tempFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSamplerOption: sampler= gives the source weights to draw by, the
// file's or 1/class size, and names itself in String.
func TestSamplerOption(t *testing.T) {
	text := tempFile(t, "w.txt", []byte("# weights\n1\n\n2.5\n0\n1e-3\n  4  \n"))
	bin := tempFile(t, "w.npy", npy("<f8", 5, []float64{1, 2.5, 0, 1e-3, 4}))
	bin32 := tempFile(t, "w32.npy", npy("<f4", 5, []float64{1, 2.5, 0, 1e-3, 4}))
	cases := []struct {
		spec    string
		samples int64
		prob    map[int64]float64 // some indices' probabilities
	}{
		{"synthetic:5?sampler=weighted:" + text, 5, map[int64]float64{2: 0, 4: 4 / 7.501}},
		{"synthetic:5?sampler=weighted:" + bin + "&samples=12", 12, map[int64]float64{2: 0, 1: 2.5 / 7.501}},
		{"synthetic:5?samples=3&sampler=weighted%3A" + bin32, 3, map[int64]float64{0: 1 / 7.501}},
	}
	for _, c := range cases {
		src, err := loader.Open(c.spec)
		if err != nil {
			t.Fatalf("%s: %v", c.spec, err)
		}
		w := loader.WeightsOf(src)
		if w == nil || w.Len() != src.Len() || w.Samples() != c.samples {
			t.Fatalf("%s: weights %+v", c.spec, w)
		}
		for i, p := range c.prob {
			if got := w.Prob(i); math.Abs(got-p) > 1e-6 {
				t.Errorf("%s: P(%d) = %g, want %g", c.spec, i, got, p)
			}
		}
		if !strings.Contains(src.String(), "sampler=") {
			t.Errorf("%s: named %s", c.spec, src)
		}
		src.Close()
	}
	// Balanced: 1/4 shared among each class's samples (80, 15, 4, 1).
	src := openSkewed(t, 100, "sampler=balanced&samples=30")
	w := loader.WeightsOf(src)
	for i, p := range map[int64]float64{0: 0.25 / 80, 80: 0.25 / 15, 95: 0.25 / 4, 99: 0.25} {
		if got := w.Prob(i); math.Abs(got-p) > 1e-12 || w.Samples() != 30 {
			t.Errorf("balanced: P(%d) = %g, want %g (%d draws)", i, got, p, w.Samples())
		}
	}
	src.Close()
	// Balanced over a part: the held-out part's own classes.
	src, err := loader.Open("synthetic:1000?sampler=balanced&holdout=3&part=val")
	if err != nil {
		t.Fatal(err)
	}
	if w := loader.WeightsOf(src); w.Len() != 30 || math.Abs(w.Prob(0)-1.0/30) > 1e-12 {
		t.Errorf("balanced val part: %d weights, P(0) = %g", w.Len(), w.Prob(0))
	}
	src.Close()
	if src, err := loader.Open("synthetic:5"); err != nil || loader.WeightsOf(src) != nil {
		t.Errorf("no sampler=: weights %v (%v)", loader.WeightsOf(src), err)
	}
}

// TestSamplerErrors: every bad sampler= or weights file is refused with
// ErrSampler, naming the file and the line or index of the first bad
// weight.
func TestSamplerErrors(t *testing.T) {
	w := func(s string) string { return tempFile(t, "w.txt", []byte(s)) }
	cases := []struct{ spec, want string }{
		{"synthetic:3?sampler=bogus", "want balanced or weighted:FILE"},
		{"synthetic:3?sampler=weighted:", "want balanced or weighted:FILE"},
		{"synthetic:3?sampler=balanced&samples=0", "samples=0"},
		{"synthetic:3?sampler=balanced&samples=x", "samples=x"},
		{"synthetic:3?samples=5", "needs sampler="},
		{"synthetic:3?sampler=balanced&order=torch", "excludes order=torch"},
		{"synthetic:3?sampler=weighted:/nonexistent/w.txt", "/nonexistent/w.txt"},
		{"synthetic:3?sampler=weighted:" + w("1\n2\n-1\n"), "w.txt:3: weight -1: want a finite number ≥ 0"},
		{"synthetic:3?sampler=weighted:" + w("1\n# c\nnan\n2\n"), "w.txt:3: weight NaN"},
		{"synthetic:3?sampler=weighted:" + w("1\nInf\n2\n"), "w.txt:2: weight +Inf"},
		{"synthetic:3?sampler=weighted:" + w("1\n1,5\n2\n"), `w.txt:2: "1,5" is not a number`},
		{"synthetic:3?sampler=weighted:" + w("1\n2\n"), "w.txt: 2 weights for the dataset's 3 samples"},
		{"synthetic:3?sampler=weighted:" + w("1\n2\n3\n4\n"), "w.txt:4: more than the dataset's 3 weights"},
		{"synthetic:3?sampler=weighted:" + w("0\n0\n0.0\n"), "w.txt: all 3 weights are zero"},
		{"synthetic:3?sampler=weighted:" + tempFile(t, "n.npy", npy("<f4", 3, []float64{1, 0, -2})), "n.npy[2]: weight -2"},
		{"synthetic:3?sampler=weighted:" + tempFile(t, "n.npy", npy("<f8", 3, []float64{1, math.Inf(-1), 2})), "n.npy[1]: weight -Inf"},
		{"synthetic:3?sampler=weighted:" + tempFile(t, "n.npy", npy("<f8", 4, []float64{1, 1, 1, 1})), "n.npy: 4 weights for the dataset's 3 samples"},
		{"synthetic:3?sampler=weighted:" + tempFile(t, "n.npy", npy("<f8", 3, []float64{1, 1})), "n.npy: weight 2 of 3: truncated file"},
		{"synthetic:3?sampler=weighted:" + tempFile(t, "n.npy", npy("<i8", 3, nil)), "want a 1-D array of float32 or float64"},
	}
	for _, c := range cases {
		src, err := loader.Open(c.spec)
		if err == nil {
			src.Close()
		}
		if !errors.Is(err, loader.ErrSampler) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrSampler saying %q", c.spec, err, c.want)
		}
	}
}

// TestSamplerBalancedStream: a stream of a dataset whose classes hold 80,
// 15, 4 and 1 percent of it, opened with sampler=balanced, delivers every
// class about a quarter of the time; zero-weight samples never come;
// a stream resumed mid-epoch delivers what the uninterrupted one did.
func TestSamplerBalancedStream(t *testing.T) {
	const n, k = 1000, 4000
	pool := loader.NewPool(2)
	defer pool.Close()
	src := openSkewed(t, n, "sampler=balanced&samples="+strconv.Itoa(k))
	defer src.Close()
	l := newTestLoader(t, pool, src, func(cfg *loader.Config) { cfg.BatchSize, cfg.Epochs = 64, 1 })
	if l.BatchesPerEpoch() != (k+63)/64 {
		t.Fatalf("%d batches per epoch, want %d", l.BatchesPerEpoch(), (k+63)/64)
	}
	all := drain(t, l, 0)
	counts := make([]int, 4)
	for _, b := range all {
		for j, label := range b.labels {
			if want := skewedLabel(b.indices[j], n); label != want {
				t.Fatalf("index %d has label %d, want %d", b.indices[j], label, want)
			}
			counts[label]++
		}
	}
	t.Logf("class counts of %d draws: %v", k, counts)
	for c, got := range counts {
		if math.Abs(float64(got)-k/4) > 0.05*k { // 0.05 is 7 standard deviations
			t.Errorf("class %d delivered %d times of %d: %v", c, got, k, counts)
		}
	}
	r := newTestLoader(t, pool, src, func(cfg *loader.Config) {
		cfg.BatchSize, cfg.Epochs, cfg.Start = 64, 1, sampler.Position{Batch: 40}
	})
	rest := drain(t, r, 0)
	if len(rest) != len(all)-40 {
		t.Fatalf("resumed at batch 40: %d batches of %d", len(rest), len(all))
	}
	for i, b := range rest {
		if !slices.Equal(b.indices, all[40+i].indices) {
			t.Fatalf("resumed batch %d: %v, uninterrupted %v", 40+i, b.indices, all[40+i].indices)
		}
	}
}

// TestSamplerZeroWeights: samples weighted 0 are never delivered.
func TestSamplerZeroWeights(t *testing.T) {
	var b strings.Builder
	for i := range 50 {
		fmt.Fprintln(&b, i%3) // indices ≡ 0 mod 3 weigh 0
	}
	file := tempFile(t, "w.txt", []byte(b.String()))
	pool := loader.NewPool(2)
	defer pool.Close()
	src, err := loader.Open("synthetic:50?sampler=weighted:" + file + "&samples=2000")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	l := newTestLoader(t, pool, src, func(cfg *loader.Config) { cfg.World, cfg.Rank, cfg.BatchSize, cfg.Epochs = 2, 1, 100, 2 })
	seen := 0
	for _, b := range drain(t, l, 0) {
		for _, i := range b.indices {
			if i%3 == 0 {
				t.Fatalf("epoch %d: zero-weight index %d delivered", b.epoch, i)
			}
			seen++
		}
	}
	if seen != 2*1000 {
		t.Errorf("rank 1 of 2 got %d samples over 2 epochs of 2000 draws, want 2000", seen)
	}
}

// TestSamplerRepeatsAugmentedApart: a sample drawn several times in an
// epoch is augmented anew each time, as a DataLoader over
// WeightedRandomSampler would (each draw keyed by its entry of the draw
// list), and the same way with 1 and 3 workers.
func TestSamplerRepeatsAugmentedApart(t *testing.T) {
	src, err := loader.Open("synthetic:10?sampler=balanced&samples=200")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	run := func(workers int) []got {
		pool := loader.NewPool(workers)
		defer pool.Close()
		l := newTestLoader(t, pool, src, func(cfg *loader.Config) { cfg.BatchSize, cfg.Epochs = 16, 1 })
		return drain(t, l, 0)
	}
	one := run(1)
	sameBatches(t, one, run(3))
	byIndex := map[int64]map[sample.Params]bool{}
	draws := map[int64]int{}
	for _, b := range one {
		for j, i := range b.indices {
			if byIndex[i] == nil {
				byIndex[i] = map[sample.Params]bool{}
			}
			byIndex[i][b.params[j]] = true
			draws[i]++
		}
	}
	for i, n := range draws {
		// 200 draws of 10 samples: about 20 each, over 81 crop corners
		// and 2 flips; identical params for most repeats would be a bug.
		if n >= 10 && len(byIndex[i]) < n/2 {
			t.Errorf("index %d drawn %d times with %d distinct params", i, n, len(byIndex[i]))
		}
	}
}
