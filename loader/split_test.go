package loader

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/sampler"
)

// labelSource has the given labels and 1×1×1 pixels equal to the index
// (mod 256); it counts decodes and, with labeler set, also implements
// Labeler. A negative label makes Sample fail with a RecordError.
type labelSource struct {
	labels  []int32
	classes int
	decodes int
	closed  bool
}

type labelerSource struct{ *labelSource }

func (s labelerSource) Label(i int64) (int32, error) { return s.labels[i], nil }

func (s *labelSource) Len() int64 { return int64(len(s.labels)) }
func (s *labelSource) Spec() augment.Spec {
	return augment.Spec{H: 1, W: 1, C: 1, DType: sample.U8, Layout: sample.HWC}
}
func (s *labelSource) Classes() []string {
	var c []string
	for i := range s.classes {
		c = append(c, fmt.Sprint("c", i))
	}
	return c
}
func (s *labelSource) String() string { return "fake:labels" }
func (s *labelSource) Close() error   { s.closed = true; return nil }
func (s *labelSource) Sample(i int64, scratch []byte) (int32, []byte, error) {
	s.decodes++
	if s.labels[i] == -2 {
		return 0, nil, &RecordError{File: "fake/file", Record: i, Err: ErrCorrupt}
	}
	scratch[0] = byte(i)
	return s.labels[i], scratch[:1], nil
}

// wantSplit computes the parts by brute force.
func wantSplit(labels []int32, k int) (train, val []int64) {
	seen := map[int32]int{}
	total := map[int32]int{}
	for _, l := range labels {
		total[l]++
	}
	for i, l := range labels {
		seen[l]++
		if seen[l] > total[l]-k {
			val = append(val, int64(i))
		} else {
			train = append(train, int64(i))
		}
	}
	return train, val
}

func TestSplitParts(t *testing.T) {
	interleaved := []int32{0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2}
	sorted := []int32{0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2}
	irregular := []int32{2, 2, 0, 1, 0, 2, 1, 1, 0, 0, 2, 1, 2, 0}
	cases := []struct {
		name    string
		labels  []int32
		k       int
		labeler bool
	}{
		{"interleaved/k=2", interleaved, 2, false},
		{"interleaved/k=2/labeler", interleaved, 2, true},
		{"class-sorted/k=3", sorted, 3, false},
		{"class-sorted/k=3/labeler", sorted, 3, true},
		{"irregular/k=1", irregular, 1, true},
		{"irregular/k=3", irregular, 3, false},
		{"k=0", irregular, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantTrain, wantVal := wantSplit(tc.labels, tc.k)
			for _, val := range []bool{false, true} {
				ls := &labelSource{labels: tc.labels, classes: 3}
				var src Source = ls
				if tc.labeler {
					src = labelerSource{ls}
				}
				part, err := Split(src, tc.k, val)
				if err != nil {
					t.Fatal(err)
				}
				if tc.labeler && ls.decodes != 0 {
					t.Errorf("a Labeler source was decoded %d times", ls.decodes)
				}
				if !tc.labeler && ls.decodes != len(tc.labels) {
					t.Errorf("scan decoded %d samples, want %d", ls.decodes, len(tc.labels))
				}
				want := wantTrain
				if val {
					want = wantVal
				}
				var got []int64
				scratch := make([]byte, 1)
				for i := range part.Len() {
					o := part.(*splitSource).Origin(i)
					got = append(got, o)
					label, pix, err := part.Sample(i, scratch)
					if err != nil || label != tc.labels[o] || pix[0] != byte(o) {
						t.Errorf("val=%v: Sample(%d) = %d, %v, %v; want label %d of index %d", val, i, label, pix, err, tc.labels[o], o)
					}
					if l, err := part.(Labeler).Label(i); err != nil || l != tc.labels[o] {
						t.Errorf("val=%v: Label(%d) = %d, %v", val, i, l, err)
					}
				}
				if !slices.Equal(got, want) {
					t.Errorf("val=%v: indices %v, want %v", val, got, want)
				}
				if _, _, err := part.Sample(part.Len(), scratch); !errors.Is(err, ErrIndex) {
					t.Errorf("val=%v: Sample past the end: %v", val, err)
				}
				if part.Close(); !ls.closed {
					t.Error("Close did not close the source")
				}
			}
		})
	}
}

func TestSplitErrors(t *testing.T) {
	cases := []struct {
		name   string
		labels []int32
		k      int
		is     error
		msg    string
	}{
		{"class too small", []int32{0, 0, 0, 1, 1, 2, 2, 2}, 2, ErrSplit, "class 1 (c1) has 2 samples"},
		{"label out of range", []int32{0, 1, 5, 2}, 1, ErrLabel, "record 2"},
		{"negative label", []int32{0, -1}, 1, ErrLabel, "record 1"},
		{"corrupt record", []int32{0, 1, -2}, 1, ErrCorrupt, "fake/file: record 2"},
		{"negative holdout", []int32{0, 1}, -1, ErrSplit, "negative"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Split(&labelSource{labels: tc.labels, classes: 3}, tc.k, true)
			if !errors.Is(err, tc.is) {
				t.Fatalf("err = %v, want %v", err, tc.is)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.msg) || !strings.HasPrefix(msg, "loader: ") {
				t.Errorf("err = %q, want it to mention %q", msg, tc.msg)
			}
		})
	}
}

// TestSplitFraction: holdout=F holds out the last round(F·n) samples of
// each class of n, at least one, with or without a Labeler.
func TestSplitFraction(t *testing.T) {
	irregular := []int32{2, 2, 0, 1, 0, 2, 1, 1, 0, 0, 2, 1, 2, 0} // 5, 4, 5
	sorted := make([]int32, 0, 300)                                // 100, 150, 50
	for c, n := range []int{100, 150, 50} {
		for range n {
			sorted = append(sorted, int32(c))
		}
	}
	cases := []struct {
		name    string
		labels  []int32
		frac    float64
		perCls  []int // held out per class
		labeler bool
	}{
		{"sorted/0.1", sorted, 0.1, []int{10, 15, 5}, true},
		{"sorted/0.25", sorted, 0.25, []int{25, 38, 13}, false}, // 37.5 and 12.5 round up
		{"irregular/0.01: at least one", irregular, 0.01, []int{1, 1, 1}, true},
		{"irregular/0.5", irregular, 0.5, []int{3, 2, 3}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// The last perCls[c] of class c, by brute force.
			seen, total := map[int32]int{}, map[int32]int{}
			for _, l := range tc.labels {
				total[l]++
			}
			var wantVal, wantTrain []int64
			for i, l := range tc.labels {
				if seen[l]++; seen[l] > total[l]-tc.perCls[l] {
					wantVal = append(wantVal, int64(i))
				} else {
					wantTrain = append(wantTrain, int64(i))
				}
			}
			for _, val := range []bool{false, true} {
				ls := &labelSource{labels: tc.labels, classes: 3}
				var src Source = ls
				if tc.labeler {
					src = labelerSource{ls}
				}
				part, err := SplitFraction(src, tc.frac, val)
				if err != nil {
					t.Fatal(err)
				}
				var got []int64
				for i := range part.Len() {
					got = append(got, part.(*splitSource).Origin(i))
				}
				want := wantTrain
				if val {
					want = wantVal
				}
				if !slices.Equal(got, want) {
					t.Errorf("val=%v: indices %v, want %v", val, got, want)
				}
			}
		})
	}
	for _, frac := range []float64{0, 1, -0.5, 2} {
		if _, err := SplitFraction(&labelSource{labels: irregular, classes: 3}, frac, true); !errors.Is(err, ErrSplit) {
			t.Errorf("frac %g: %v, want ErrSplit", frac, err)
		}
	}
	// A class of one sample has none to spare.
	if _, err := SplitFraction(&labelSource{labels: []int32{0, 0, 0, 1}, classes: 2}, 0.1, true); !errors.Is(err, ErrSplit) ||
		!strings.Contains(err.Error(), "class 1 (c1) has 1 samples") {
		t.Errorf("class of one: %v", err)
	}
}

// sizedFake is a labelSource of images of varying size: sample i is
// (i+1)×(2i+1) pixels of value i, and scratch must hold MaxPixels·C.
type sizedFake struct{ *labelSource }

func (s sizedFake) Spec() augment.Spec {
	return augment.Spec{C: 1, DType: sample.U8, Layout: sample.HWC}
}
func (s sizedFake) MaxPixels() int64 { return 1000 }
func (s sizedFake) Sample(i int64, scratch []byte) (int32, []byte, error) {
	l, pix, _, err := s.SampleSized(i, scratch, nil)
	return l, pix, err
}
func (s sizedFake) SampleSized(i int64, scratch []byte, _ Scaler) (int32, []byte, Decoded, error) {
	s.decodes++
	h, w := int(i)+1, 2*int(i)+1
	pix := scratch[:h*w] // panics unless scratch holds MaxPixels
	for k := range pix {
		pix[k] = byte(i)
	}
	return s.labels[i], pix, WholeImage(h, w, 1), nil
}

type namedSizedFake struct{ sizedFake }

func (s namedSizedFake) Name(i int64) string { return fmt.Sprint("img", i) }

// TestSplitSized: a part of images of varying size is a SizedSource (so a
// stream of it can resize and crop), named if its source is, and its
// samples are the source's, sizes included.
func TestSplitSized(t *testing.T) {
	labels := []int32{0, 1, 0, 1, 0, 1, 0, 1, 0, 1}
	for _, named := range []bool{false, true} {
		for _, val := range []bool{false, true} {
			var src Source = sizedFake{&labelSource{labels: labels, classes: 2}}
			if named {
				src = namedSizedFake{src.(sizedFake)}
			}
			part, err := Split(src, 2, val) // no Labeler: scanned through Sample, with MaxPixels of scratch
			if err != nil {
				t.Fatal(err)
			}
			ss, ok := As[SizedSource](part)
			if !ok || ss.MaxPixels() != 1000 {
				t.Fatalf("named=%v val=%v: part %T is not a SizedSource of 1000 pixels", named, val, part)
			}
			if _, isNamer := As[Namer](part); isNamer != named {
				t.Errorf("named=%v: part is a Namer: %v", named, isNamer)
			}
			if l, err := part.(Labeler).Label(0); err != nil || l != labels[part.(interface{ Origin(int64) int64 }).Origin(0)] {
				t.Errorf("Label(0) = %d, %v", l, err)
			}
			scratch := make([]byte, 1000)
			for i := range part.Len() {
				o := part.(interface{ Origin(int64) int64 }).Origin(i)
				l, pix, dec, err := ss.SampleSized(i, scratch, nil)
				h, w, d := dec.H, dec.W, dec.Scale
				if err != nil || l != labels[o] || h != int(o)+1 || w != 2*int(o)+1 || d != 1 || len(pix) != h*w || pix[0] != byte(o) {
					t.Errorf("SampleSized(%d) = %d, %d bytes, %dx%d/%d, %v; want index %d", i, l, len(pix), h, w, d, err, o)
				}
				if named && part.(Namer).Name(i) != fmt.Sprint("img", o) {
					t.Errorf("Name(%d) = %q, want img%d", i, part.(Namer).Name(i), o)
				}
			}
			if _, _, _, err := ss.SampleSized(part.Len(), scratch, nil); !errors.Is(err, ErrIndex) {
				t.Errorf("SampleSized past the end: %v", err)
			}
		}
	}
}

// shardedSource is a labelerSource read as shards: index i lives in
// shard shardOf(i); it records what it was asked to prefetch.
type shardedSource struct {
	labelerSource
	order   *sampler.Shards
	shardOf func(i int64) int32
	fetched []int64
}

func (s *shardedSource) ShardOrder() *sampler.Shards { return s.order }
func (s *shardedSource) Prefetch(idx []int64)        { s.fetched = append(s.fetched, idx...) }

func newShardedSource(t *testing.T, labels []int32, classes int, shardOf func(i int64) int32) *shardedSource {
	t.Helper()
	var runs []sampler.Run
	for i := range int64(len(labels)) {
		if n := len(runs); n > 0 && runs[n-1].Shard == shardOf(i) {
			runs[n-1].Len++
			continue
		}
		runs = append(runs, sampler.Run{Start: i, Len: 1, Shard: shardOf(i)})
	}
	order, err := sampler.NewShards(runs, 1)
	if err != nil {
		t.Fatal(err)
	}
	return &shardedSource{labelerSource: labelerSource{&labelSource{labels: labels, classes: classes}}, order: order, shardOf: shardOf}
}

// A part of a shard-ordered source keeps the order: with a window of one
// shard, an epoch of the part reads each shard's samples in one stretch,
// every sample once; and its prefetches reach the source as its indices.
func TestSplitShardOrder(t *testing.T) {
	byClass := make([]int32, 40) // 4 classes of 10, a shard per 10: one run per shard
	interleaved := make([]int32, 40)
	for i := range byClass {
		byClass[i], interleaved[i] = int32(i/10), int32(i%3)
	}
	for _, tc := range []struct {
		name    string
		labels  []int32
		classes int
		shardOf func(i int64) int32
	}{
		{"webdataset", interleaved, 3, func(i int64) int32 { return int32(i / 10) }},
		{"folder", byClass, 4, func(i int64) int32 { return int32(i/5) % 4 }}, // runs of 5, two per shard
	} {
		for _, val := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/val=%v", tc.name, val), func(t *testing.T) {
				src := newShardedSource(t, tc.labels, tc.classes, tc.shardOf)
				part, err := Split(src, 2, val)
				if err != nil {
					t.Fatal(err)
				}
				p := part.(*splitSource)
				order := p.ShardOrder()
				if order == nil || order.Len() != p.Len() || order.Window() != 1 {
					t.Fatalf("part's shard order %+v, want one over its %d samples, window 1", order, p.Len())
				}
				for _, r := range order.Runs() {
					for i := r.Start; i < r.Start+r.Len; i++ {
						if got := src.shardOf(p.Origin(i)); got != r.Shard {
							t.Fatalf("part index %d (source %d) is in shard %d, its run says %d", i, p.Origin(i), got, r.Shard)
						}
					}
				}
				ep := sampler.Distributed{N: p.Len(), World: 1, Seed: 7, Shuffle: true, Shards: order}.Epoch(0)
				seen := map[int64]bool{}
				stretches := map[int32]int{}
				last := int32(-1)
				for pos := range ep.Len() {
					i := ep.At(pos)
					if seen[i] || i < 0 || i >= p.Len() {
						t.Fatalf("position %d: index %d again or out of [0, %d)", pos, i, p.Len())
					}
					seen[i] = true
					if sh := src.shardOf(p.Origin(i)); sh != last {
						stretches[sh]++
						last = sh
					}
				}
				for sh, n := range stretches {
					if n != 1 {
						t.Errorf("shard %d read in %d stretches, want 1 (the order is not the source's shard order)", sh, n)
					}
				}
				shards := map[int32]bool{}
				for i := range p.Len() {
					shards[src.shardOf(p.Origin(i))] = true
				}
				if len(seen) != int(p.Len()) || len(stretches) != len(shards) {
					t.Errorf("epoch read %d of %d samples from %d shards, want all from %d", len(seen), p.Len(), len(stretches), len(shards))
				}
				p.Prefetch([]int64{0, p.Len() - 1, p.Len(), -1})
				if want := []int64{p.Origin(0), p.Origin(p.Len() - 1)}; !slices.Equal(src.fetched, want) {
					t.Errorf("source prefetched %v, want %v", src.fetched, want)
				}
			})
		}
	}
}
