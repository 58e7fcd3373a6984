package synthetic

import (
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/loader"
)

// defaultLen is the size of the built-in synthetic dataset, the size of
// CIFAR-10's training split.
const defaultLen = 50000

func init() {
	loader.RegisterFormat("synthetic", open)
}

// open parses "synthetic:N?seed=S": N samples (default 50,000) of the
// dataset seed S picks (default 0).
func open(spec string) (loader.Source, error) {
	path, query, _ := strings.Cut(spec, "?")
	n, seed := int64(defaultLen), uint64(0)
	if path != "" {
		v, err := strconv.ParseInt(path, 10, 64)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("synthetic:%s: want a positive sample count", path)
		}
		n = v
	}
	opts, err := url.ParseQuery(query)
	if err != nil {
		return nil, fmt.Errorf("synthetic:%s: %w", spec, err)
	}
	for k, v := range opts {
		if k != "seed" || len(v) != 1 {
			return nil, fmt.Errorf("synthetic:%s: unknown option %s (want seed=S)", spec, k)
		}
		if seed, err = strconv.ParseUint(v[0], 10, 64); err != nil {
			return nil, fmt.Errorf("synthetic:%s: seed=%s: want an unsigned integer", spec, v[0])
		}
	}
	return New(n, seed), nil
}

// source is a deterministic CIFAR-shaped dataset (32×32×3, 10 classes)
// with class-dependent structure a model can learn: each class has its own
// colour and stripe orientation, shifted and noised per sample. Sample i is
// a pure function of (seed, i). It is safe for concurrent use.
type source struct {
	n       int64
	seed    uint64
	classes []string
	// templates holds one 64×64 HWC pattern per class; a sample is a
	// shifted 32×32 window of it, so the hot loop never wraps.
	templates [10][64 * 64 * 3]uint8
}

// New returns a synthetic dataset of n samples; seed picks another
// dataset of the same classes ("synthetic:N" is seed 0). It is a Source
// held in memory (10 templates of 12 KiB), with nothing to open or close,
// for tests, examples and benchmarks that need a dataset without files.
func New(n int64, seed uint64) loader.Source {
	s := &source{n: n, seed: seed}
	for k := range s.templates {
		s.classes = append(s.classes, "class"+strconv.Itoa(k))
		angle := float64(k) * math.Pi / 10
		dx, dy := math.Cos(angle), math.Sin(angle)
		hue := float64(k) / 10 * 2 * math.Pi
		base := [3]float64{128 + 60*math.Cos(hue), 128 + 60*math.Cos(hue-2.094), 128 + 60*math.Cos(hue+2.094)}
		for y := 0; y < 64; y++ {
			for x := 0; x < 64; x++ {
				period := 8.0
				if k%2 == 1 {
					period = 16
				}
				stripe := math.Cos(2 * math.Pi * (float64(x)*dx + float64(y)*dy) / period)
				for c := 0; c < 3; c++ {
					v := base[c] + 50*stripe
					s.templates[k][(y*64+x)*3+c] = uint8(math.Max(0, math.Min(255, v)))
				}
			}
		}
	}
	return s
}

// Len returns the number of samples.
func (s *source) Len() int64 { return s.n }

// Spec returns 32×32×3 U8 HWC, what an image decoder gives.
func (s *source) Spec() augment.Spec {
	return augment.Spec{H: 32, W: 32, C: 3, DType: sample.U8, Layout: sample.HWC}
}

// Classes returns class0 … class9.
func (s *source) Classes() []string { return s.classes }

// String names the source as synthetic:N, or synthetic:N?seed=S.
func (s *source) String() string {
	name := "synthetic:" + strconv.FormatInt(s.n, 10)
	if s.seed != 0 {
		name += "?seed=" + strconv.FormatUint(s.seed, 10)
	}
	return name
}

// Close does nothing.
func (s *source) Close() error { return nil }

// Sample writes sample i into scratch.
func (s *source) Sample(i int64, scratch []byte) (int32, []byte, error) {
	const size = 32 * 32 * 3
	if i < 0 || i >= s.n {
		return 0, nil, &loader.RecordError{File: s.String(), Record: i, Err: loader.ErrIndex}
	}
	if len(scratch) < size {
		return 0, nil, fmt.Errorf("synthetic: scratch of %d bytes, need %d", len(scratch), size)
	}
	h := mix64(s.seed ^ mix64(uint64(i)))
	label := int32(h % 10)
	h = mix64(h)
	ox, oy := int(h&31), int(h>>5&31)
	t := &s.templates[label]
	pix := scratch[:size]
	noise := h
	for y := 0; y < 32; y++ {
		row := t[((y+oy)*64+ox)*3:][: 32*3 : 32*3]
		out := pix[y*32*3:][: 32*3 : 32*3]
		for x := range out {
			// xorshift64: cheap per-pixel noise in [-32, 31].
			noise ^= noise << 13
			noise ^= noise >> 7
			noise ^= noise << 17
			v := int(row[x]) + int(noise&63) - 32
			out[x] = uint8(min(max(v, 0), 255))
		}
	}
	return label, pix, nil
}

// mix64 is the splitmix64 finaliser: a bijective, well-mixing hash.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
