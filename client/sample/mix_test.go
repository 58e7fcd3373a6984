package sample

import (
	"reflect"
	"strings"
	"testing"
)

func TestSoftLabels(t *testing.T) {
	third := float32(1.0 / 3)
	rest := float32(1 - 1.0/3)
	for _, tc := range []struct {
		name    string
		mix     Mix
		labels  []int32
		classes int
		want    []float32
		err     string
	}{
		{"no mix", Mix{}, []int32{2, 0}, 3, []float32{0, 0, 1, 1, 0, 0}, ""},
		{"mixup", Mix{Kind: MixUp, Lambda: 1.0 / 3}, []int32{2, 0, 1}, 3,
			[]float32{0, rest, third, third, 0, rest, rest, third, 0}, ""},
		{"same class", Mix{Kind: CutMix, Lambda: 1.0 / 3}, []int32{1, 1}, 2,
			[]float32{0, float32(third + rest), 0, float32(third + rest)}, ""},
		{"one sample", Mix{Kind: MixUp, Lambda: 0.25}, []int32{0}, 2, []float32{1, 0}, ""},
		{"short dst", Mix{}, []int32{0, 1}, 2, make([]float32, 3), "need 4 values"},
		{"label too big", Mix{}, []int32{0, 2}, 2, make([]float32, 4), "label 2 of sample 1"},
		{"negative label", Mix{}, []int32{-1}, 2, make([]float32, 2), "label -1"},
		{"no classes", Mix{}, nil, 0, nil, "0 classes"},
	} {
		dst := make([]float32, max(len(tc.want), len(tc.labels)*tc.classes))
		for i := range dst {
			dst[i] = 9 // SoftLabels must clear, or on error leave alone
		}
		if tc.err != "" {
			dst = dst[:len(tc.want)]
		}
		err := tc.mix.SoftLabels(dst, tc.labels, tc.classes)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.err)
			}
		case err != nil || !reflect.DeepEqual(dst, tc.want):
			t.Errorf("%s: %v, %v; want %v", tc.name, dst, err, tc.want)
		}
	}
}
