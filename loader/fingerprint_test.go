package loader_test

import (
	"errors"
	"hash"
	"regexp"
	"testing"

	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/internal/loadertest"
)

// names is a source of len(list) samples named by list, labelled 0,
// with a digest of its own when digest is not "".
type names struct {
	loader.Source
	list   []string
	digest string
}

func (n names) Len() int64          { return int64(len(n.list)) }
func (n names) Name(i int64) string { return n.list[i] }

type digested struct {
	names
	err error
}

func (d digested) Digest(h hash.Hash) error {
	loader.DigestString(h, d.digest)
	return d.err
}

func fingerprint(t *testing.T, src loader.Source) string {
	t.Helper()
	fp, err := loader.Fingerprint(src)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^v1:[0-9a-f]{64}$`).MatchString(fp) {
		t.Fatalf("fingerprint %q: want v1: and 64 hex digits", fp)
	}
	return fp
}

// TestFingerprint: what changes a fingerprint and what does not.
func TestFingerprint(t *testing.T) {
	plain := func(t *testing.T) loader.Source { src, _ := loadertest.CapCases()[0].New(t); return src }
	named := func(list ...string) func(t *testing.T) loader.Source {
		return func(t *testing.T) loader.Source { return names{plain(t), list, ""} }
	}
	withDigest := func(d string) func(t *testing.T) loader.Source {
		return func(t *testing.T) loader.Source { return digested{names{plain(t), []string{"a"}, d}, nil} }
	}
	split := func(k int, val bool) func(t *testing.T) loader.Source {
		return func(t *testing.T) loader.Source {
			part, err := loader.Split(plain(t), k, val)
			if err != nil {
				t.Fatal(err)
			}
			return part
		}
	}
	for _, c := range []struct {
		name string
		a, b func(t *testing.T) loader.Source
		same bool
	}{
		{"same source", plain, plain, true},
		{"names in another directory", named("/data/x/cat/1.jpg", "/data/x/dog/2.jpg"), named("/mnt/y/cat/1.jpg", "/mnt/y/dog/2.jpg"), true},
		{"a shard in another directory", named("d/t.tar(a/1)", "d/t.tar(a/2)"), named("s3://b/p/t.tar(a/1)", "s3://b/p/t.tar(a/2)"), true},
		{"a name renamed", named("d/cat/1.jpg", "d/dog/2.jpg"), named("d/cat/1.jpg", "d/dog/3.jpg"), false},
		{"a name moved", named("d/cat/1.jpg", "d/dog/2.jpg"), named("d/cat/1.jpg", "d/cat/2.jpg"), false},
		{"names against none", plain, named(make([]string, loadertest.CapFakeLen)...), false},
		{"a digest", withDigest("x"), withDigest("x"), true},
		{"another digest", withDigest("x"), withDigest("y"), false},
		// 12 samples of 2 classes: holdout 3 makes parts of 6 and 6, told
		// apart by the part's digest alone (no names, labels or digest).
		{"train and val of the same size", split(3, false), split(3, true), false},
		{"another holdout", split(2, true), split(1, true), false},
		{"a split and its source", plain, split(3, false), false},
		{"the same split", split(3, true), split(3, true), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := fingerprint(t, c.a(t)), fingerprint(t, c.b(t))
			if (a == b) != c.same {
				t.Errorf("fingerprints %s and %s: equal %v, want %v", a, b, a == b, c.same)
			}
		})
	}
}

// TestFingerprintCaps: every capability set fingerprints the same twice,
// and through a Wrapper as without; names, labels and a digest each
// change it.
func TestFingerprintCaps(t *testing.T) {
	fps := map[string]string{}
	for _, c := range loadertest.CapCases() {
		src, _ := c.New(t)
		src2, _ := c.New(t)
		fps[c.Name] = fingerprint(t, src)
		if fingerprint(t, &wrapped{loader.Wrap(src2)}) != fps[c.Name] {
			t.Errorf("%s: a Wrapper changes the fingerprint", c.Name)
		}
	}
	for _, c := range []string{"namer", "labeler", "digest", "sized", "all"} {
		if fps[c] == fps["none"] {
			t.Errorf("%s fingerprints as none", c)
		}
	}
	if fps["decoder"] != fps["none"] {
		t.Error("a decoder name changes the fingerprint (only a Digester says what decodes)")
	}
}

// TestFingerprintErrors: a Digester's error is Fingerprint's, named.
func TestFingerprintErrors(t *testing.T) {
	src, _ := loadertest.CapCases()[0].New(t)
	boom := errors.New("boom")
	_, err := loader.Fingerprint(digested{names{src, []string{"a"}, "x"}, boom})
	if !errors.Is(err, boom) || !regexp.MustCompile(`^loader: fingerprint capfake`).MatchString(err.Error()) {
		t.Fatalf("err = %v, want boom, named", err)
	}
}
