package tar

import (
	"context"
	"math"
	"testing"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/internal/loadertest"
)

// openParts opens the train and val parts of base with hold (holdout=…),
// which must be SizedSources whose names are disjoint and together every
// sample of base.
func openParts(t *testing.T, base, hold string) (train, val loader.Source, full *source) {
	t.Helper()
	whole, err := loader.Open(base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { whole.Close() })
	parts := map[string]loader.Source{}
	for _, p := range []string{"train", "val"} {
		src, err := loader.Open(base + "&" + hold + "&part=" + p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { src.Close() })
		if _, ok := src.(loader.SizedSource); !ok || src.Spec().H != 0 {
			t.Fatalf("%s part %T (%v) is not a loader.SizedSource", p, src, src.Spec())
		}
		parts[p] = src
	}
	seen := map[string]string{}
	for p, src := range parts {
		for i := range src.Len() {
			name := src.(loader.Namer).Name(i)
			if q, dup := seen[name]; dup {
				t.Fatalf("%s is in the %s part and the %s part", name, q, p)
			}
			seen[name] = p
		}
	}
	if int64(len(seen)) != whole.Len() {
		t.Fatalf("the parts hold %d samples of %d", len(seen), whole.Len())
	}
	for i := range whole.Len() {
		if _, ok := seen[whole.(loader.Namer).Name(i)]; !ok {
			t.Fatalf("%s is in neither part", whole.(loader.Namer).Name(i))
		}
	}
	return parts["train"], parts["val"], whole.(*source)
}

// TestSizedHoldout: holdout= on a size=any tar, as a count and as a
// fraction, gives parts of images of varying size that are disjoint and
// cover the dataset, and a stream of the training part resizes them.
func TestSizedHoldout(t *testing.T) {
	p, _ := varyingTar(t) // 3 classes of 4
	for _, hold := range []string{"holdout=1", "holdout=0.25"} {
		t.Run(hold, func(t *testing.T) {
			train, val, _ := openParts(t, "tar:"+p+"?size=any&maxpixels=400000", hold)
			if train.Len() != 9 || val.Len() != 3 {
				t.Fatalf("train %d, val %d; want 9 and 3", train.Len(), val.Len())
			}
			for i := range val.Len() { // the last of each class
				if l, _ := val.(loader.Labeler).Label(i); l != int32(i) {
					t.Errorf("val sample %d has label %d", i, l)
				}
			}
			pipe, err := augment.NewPipeline(train.Spec(), augment.RandomResizedCrop{Size: 16})
			if err != nil {
				t.Fatal(err)
			}
			pool := loader.NewPool(2)
			defer pool.Close()
			l, err := loader.New(pool, loader.Config{Source: train, Pipeline: pipe, BatchSize: 4, World: 1, Epochs: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			got := map[int64]bool{}
			for {
				b, err := l.Next(context.Background())
				if err != nil {
					break
				}
				for _, i := range b.Indices {
					got[i] = true
				}
				b.Release()
			}
			if len(got) != 9 {
				t.Fatalf("an epoch of the training part read %d distinct samples, want 9", len(got))
			}
		})
	}
}

// TestLargeImagesHoldout: holdout=0.1 on the large-image set holds out a
// tenth of each class.
func TestLargeImagesHoldout(t *testing.T) {
	p := loadertest.LargeImagesTar(t)
	train, val, whole := openParts(t, "tar:"+p+"?size=any", "holdout=0.1")
	counts := make([]int, len(whole.Classes()))
	for i := range whole.Len() {
		counts[whole.samples[i].label]++
	}
	held := make([]int, len(counts))
	for i := range val.Len() {
		l, err := val.(loader.Labeler).Label(i)
		if err != nil {
			t.Fatal(err)
		}
		held[l]++
	}
	for c, n := range counts {
		if want := int(math.Round(0.1 * float64(n))); held[c] != want {
			t.Errorf("class %s: %d of %d held out, want %d", whole.Classes()[c], held[c], n, want)
		}
	}
	t.Logf("train %d, val %d", train.Len(), val.Len())
}
