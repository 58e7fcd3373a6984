package objstore

import (
	"slices"
	"testing"
)

func TestExpandBraces(t *testing.T) {
	for in, want := range map[string][]string{
		"a.tar":                {"a.tar"},
		"t-{000..002}.tar":     {"t-000.tar", "t-001.tar", "t-002.tar"},
		"t-{8..10}.tar":        {"t-8.tar", "t-9.tar", "t-10.tar"},
		"{train,val}/{0..1}.x": {"train/0.x", "train/1.x", "val/0.x", "val/1.x"},
	} {
		got, err := expandBraces(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("expandBraces(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"t-{0..", "t-{3..1}", "t-{a..b}", "t-{0..999999999}"} {
		if got, err := expandBraces(bad); err == nil {
			t.Errorf("expandBraces(%q) = %q, want an error", bad, got)
		}
	}
}

func TestSafeNames(t *testing.T) {
	for _, k := range []string{"", "a//b", "../x", "a/./b", "a/..", "/abs"} {
		if safeKey(k) {
			t.Errorf("safeKey(%q) = true", k)
		}
	}
	if !safeKey("cifar/train-000.tar") {
		t.Error("safeKey refuses a plain key")
	}
	for _, b := range []string{"ab", "Bucket", "a_b", "..ab", "a..b", "-ab", strings63()} {
		if validBucket(b) {
			t.Errorf("validBucket(%q) = true", b)
		}
	}
}

func strings63() string {
	b := make([]byte, 64)
	for i := range b {
		b[i] = 'a'
	}
	return string(b)
}
