package loader

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/loaderd/loaderd/augment"
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
	return augment.Spec{H: 1, W: 1, C: 1, DType: augment.U8, Layout: augment.HWC}
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
