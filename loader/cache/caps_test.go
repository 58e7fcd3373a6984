package cache_test

import (
	"testing"

	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/cache"
	"github.com/loaderd/loaderd/loader/internal/loadertest"
)

func identity(i int64) int64 { return i }

func origin(part loader.Source) func(int64) int64 {
	return part.(interface{ Origin(int64) int64 }).Origin
}

// capsConfig holds every sample of a CapFake, of either kind.
var capsConfig = cache.Config{Bytes: 4096}

// TestCacheCaps: a cache has exactly its source's capabilities, each
// answering as the source does, on a miss and on a hit: a cache of a
// source that is no Namer (no SizedSource, no ShardOrderer, …) does not
// claim to be one.
func TestCacheCaps(t *testing.T) {
	for _, c := range loadertest.CapCases() {
		t.Run(c.Name, func(t *testing.T) {
			src, f := c.New(t)
			ch, err := cache.New(src, capsConfig)
			if err != nil {
				t.Fatal(err)
			}
			loadertest.CheckWrapped(t, ch, f, c.Want, identity) // misses
			loadertest.CheckWrapped(t, ch, f, c.Want, identity) // hits
			if s := ch.Stats(); s.Entries != loadertest.CapFakeLen || s.Hits == 0 {
				t.Errorf("%+v: want every sample cached, and hits", s)
			}
			if ch.Close(); !f.Closed() {
				t.Error("closing the cache does not close the source")
			}
		})
	}
}

// TestSplitOfCacheCaps and TestCacheOfSplitCaps: wrappers of wrappers
// keep the capabilities of the source at the bottom, and the part's
// CapDigest.
func TestSplitOfCacheCaps(t *testing.T) {
	for _, c := range loadertest.CapCases() {
		for _, val := range []bool{false, true} {
			t.Run(c.Name+map[bool]string{false: "/train", true: "/val"}[val], func(t *testing.T) {
				src, f := c.New(t)
				ch, err := cache.New(src, capsConfig)
				if err != nil {
					t.Fatal(err)
				}
				part, err := loader.Split(ch, 2, val)
				if err != nil {
					t.Fatal(err)
				}
				loadertest.CheckWrapped(t, part, f, c.Want|loader.CapDigest, origin(part)) // a part digests which it is
				if part.Close(); !f.Closed() {
					t.Error("closing the part does not close the source")
				}
			})
		}
	}
}

func TestCacheOfSplitCaps(t *testing.T) {
	for _, c := range loadertest.CapCases() {
		for _, val := range []bool{false, true} {
			t.Run(c.Name+map[bool]string{false: "/train", true: "/val"}[val], func(t *testing.T) {
				src, f := c.New(t)
				part, err := loader.Split(src, 2, val)
				if err != nil {
					t.Fatal(err)
				}
				ch, err := cache.New(part, capsConfig)
				if err != nil {
					t.Fatal(err)
				}
				loadertest.CheckWrapped(t, ch, f, c.Want|loader.CapDigest, origin(part))
				loadertest.CheckWrapped(t, ch, f, c.Want|loader.CapDigest, origin(part))
				if ch.Close(); !f.Closed() {
					t.Error("closing the cache does not close the source")
				}
			})
		}
	}
}
