package loader_test

import (
	"bytes"
	"testing"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/loader"
)

// TestWorkersMetamorphicPhoto: a chain with photometric ops and random
// erasing gives byte-identical batches and params with 1 and 4 workers,
// and each sample is the pipeline applied with its recorded params.
func TestWorkersMetamorphicPhoto(t *testing.T) {
	src, err := loader.Open("cifar:testdata/cifar10")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ops, err := augment.ParseOps("crop=32:4,flip,color_jitter=0.4:0.4:0.4:0.1,trivial_augment_wide,normalize=cifar10,out=f32:chw,random_erasing=0.5:0.02-0.33:0.3-3.3:random")
	if err != nil {
		t.Fatal(err)
	}
	pipe, err := augment.NewPipeline(src.Spec(), ops...)
	if err != nil {
		t.Fatal(err)
	}
	p1, p4 := loader.NewPool(1), loader.NewPool(4)
	defer p1.Close()
	defer p4.Close()
	use := func(c *loader.Config) { c.Pipeline, c.Epochs = pipe, 2 }
	a := drain(t, newTestLoader(t, p1, src, use), 0)
	b := drain(t, newTestLoader(t, p4, src, func(c *loader.Config) { use(c); c.InFlight = 3 }), 0)
	sameBatches(t, a, b)
	want := make([]byte, pipe.Out().Bytes())
	erased := 0
	for _, g := range a[:4] {
		for k, idx := range g.indices {
			_, pix, _ := src.Sample(idx, nil)
			if g.params[k] != pipe.Draw(42, g.epoch, idx) {
				t.Fatalf("sample %d: params %+v, the pipeline draws %+v", idx, g.params[k], pipe.Draw(42, g.epoch, idx))
			}
			if g.params[k].Erase.Applied {
				erased++
			}
			if err := pipe.Apply(want, pix, g.params[k]); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(want, g.data[k*len(want):(k+1)*len(want)]) {
				t.Fatalf("sample %d: pixels differ from the pipeline's output", idx)
			}
		}
	}
	if erased == 0 {
		t.Fatal("no sample of the first batches was erased")
	}
}
