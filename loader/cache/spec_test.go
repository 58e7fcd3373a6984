package cache_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/loaderd/loaderd/loader/cache"
)

// TestSplitSpec: the cache's options come out, the format's stay, in
// their order; bad values are all reported at once.
func TestSplitSpec(t *testing.T) {
	for _, tc := range []struct {
		spec, rest string
		bytes      int64
		on         bool
		err        string
	}{
		{spec: "synthetic:100", rest: "synthetic:100"},
		{spec: "tar:x.tar?size=32&cache=decoded", rest: "tar:x.tar?size=32", on: true},
		{spec: "tar:x.tar?cache=decoded&cache_bytes=2GiB&holdout=5", rest: "tar:x.tar?holdout=5", bytes: 2 << 30, on: true},
		{spec: "tar:x.tar?cache=none&size=any", rest: "tar:x.tar?size=any"},
		{spec: "tar:x.tar?cache=lru", err: "cache=lru: want decoded or none"},
		{spec: "tar:x.tar?cache_bytes=1GiB", err: "cache_bytes=1GiB needs cache=decoded"},
		{spec: "tar:x.tar?cache=decoded&cache_bytes=lots", err: "cache_bytes=lots: want a positive size"},
		{spec: "tar:x.tar?cache=x&cache_bytes=0", err: "cache=x: want decoded or none; cache_bytes=0: want a positive size"},
	} {
		rest, cfg, on, err := cache.SplitSpec(tc.spec)
		if tc.err != "" {
			if !errors.Is(err, cache.ErrConfig) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want an ErrConfig saying %q", tc.spec, err, tc.err)
			}
			continue
		}
		if err != nil || rest != tc.rest || cfg.Bytes != tc.bytes || on != tc.on {
			t.Errorf("%s: %q %+v %v %v, want %q %d %v", tc.spec, rest, cfg, on, err, tc.rest, tc.bytes, tc.on)
		}
	}
}

// TestOpen: a cache only when asked; holdout= applies before it, so the
// cache holds the part; errors of the format come through.
func TestOpen(t *testing.T) {
	src, err := cache.Open("synthetic:100?holdout=2&part=val&cache=decoded")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	c, ok := src.(*cache.Cache)
	if !ok || c.Len() != 20 || c.Stats().Capacity != 20*3072 {
		t.Fatalf("%T of %d samples, %+v; want a cache of the 20 held-out samples", src, src.Len(), c.Stats())
	}
	if want := "synthetic:100?holdout=2&part=val&cache=decoded&cache_bytes=61440"; c.String() != want {
		t.Errorf("String %q, want %q", c.String(), want)
	}
	plain, err := cache.Open("synthetic:100")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, ok := plain.(*cache.Cache); ok {
		t.Error("a cache without cache=decoded")
	}
	if _, err := cache.Open("synthetic:abc?cache=decoded"); err == nil || !strings.Contains(err.Error(), "synthetic:abc") {
		t.Errorf("a bad dataset: %v", err)
	}
}
