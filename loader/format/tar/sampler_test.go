package tar

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/internal/loadertest"
)

// TestSamplerOption: sampler=balanced reads a tar's labels from its index
// (no image decoded) and weighs each class 1/size; with order=shards,
// which reads shard by shard, it is refused.
func TestSamplerOption(t *testing.T) {
	dir := t.TempDir()
	jpg := loadertest.Fixture(t, "img/rgb.jpg")
	for k := range 2 {
		var ms []entry
		for i := range 4 + 2*k { // shard k: class k, 4 or 6 samples
			ms = append(ms, entry{name: fmt.Sprintf("%d-%d.jpg", k, i), data: jpg}, entry{name: fmt.Sprintf("%d-%d.cls", k, i), data: []byte{'0' + byte(k)}})
		}
		writeTar(t, filepath.Join(dir, fmt.Sprintf("t%d.tar", k)), ms...)
	}
	src, err := loader.Open("tar:" + dir + "?sampler=balanced&samples=20")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	w := loader.WeightsOf(src)
	if w == nil || w.Len() != 10 || w.Samples() != 20 || math.Abs(w.Prob(0)-0.5/4) > 1e-12 || math.Abs(w.Prob(9)-0.5/6) > 1e-12 {
		t.Fatalf("weights %+v", w)
	}
	_, err = loader.Open("tar:" + dir + "?order=shards&sampler=balanced")
	if !errors.Is(err, loader.ErrSampler) || !strings.Contains(err.Error(), "excludes order=shards") {
		t.Fatalf("order=shards with sampler=balanced: %v", err)
	}
}
