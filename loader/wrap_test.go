package loader_test

import (
	"testing"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/internal/loadertest"
)

func identity(i int64) int64 { return i }

// origin returns a Split part's map to its source's indices.
func origin(part loader.Source) func(int64) int64 {
	return part.(interface{ Origin(int64) int64 }).Origin
}

// TestCaps: the capabilities of a plain source are the optional
// interfaces its type implements, CapSized only for images of varying
// size.
func TestCaps(t *testing.T) {
	for _, c := range loadertest.CapCases() {
		t.Run(c.Name, func(t *testing.T) {
			src, f := c.New(t)
			loadertest.CheckWrapped(t, src, f, c.Want, identity)
		})
	}
}

func TestCapString(t *testing.T) {
	for c, want := range map[loader.Cap]string{
		0:                                    "none",
		loader.CapNamer | loader.CapSized:    "namer|sized",
		loader.CapDecoder | loader.CapFields: "decoder|fields",
		loader.CapNamer | loader.Cap(256):    "namer|0x100",
	} {
		if got := c.String(); got != want {
			t.Errorf("%#x: %q, want %q", uint16(c), got, want)
		}
	}
	if !(loader.CapNamer | loader.CapSized).Has(loader.CapSized) || loader.CapNamer.Has(loader.CapNamer|loader.CapSized) {
		t.Error("Has")
	}
}

// wrapped is the least wrapper: a Wrapper and nothing else.
type wrapped struct{ loader.Wrapper }

// TestWrapperPassesThrough: a type that only embeds a Wrapper has its
// source's capabilities, no more, each answering as the source does.
func TestWrapperPassesThrough(t *testing.T) {
	for _, c := range loadertest.CapCases() {
		t.Run(c.Name, func(t *testing.T) {
			src, f := c.New(t)
			w := &wrapped{loader.Wrap(src)}
			loadertest.CheckWrapped(t, w, f, c.Want, identity)
			if w.Unwrap() != src || w.Close() != nil || !f.Closed() {
				t.Error("Unwrap or Close does not reach the source")
			}
		})
	}
}

// TestSplitCaps: both parts of a Split have exactly their source's
// capabilities, each through the part's map to the source's indices, and
// CapDigest (a part digests which part it is): a part of a source that is
// no Namer (no SizedSource, …) does not claim to be one.
func TestSplitCaps(t *testing.T) {
	for _, c := range loadertest.CapCases() {
		for _, val := range []bool{false, true} {
			t.Run(c.Name+map[bool]string{false: "/train", true: "/val"}[val], func(t *testing.T) {
				src, f := c.New(t)
				part, err := loader.Split(src, 2, val)
				if err != nil {
					t.Fatal(err)
				}
				loadertest.CheckWrapped(t, part, f, c.Want|loader.CapDigest, origin(part))
				// A split of a split is one more wrapper of the same kind.
				inner, err := loader.Split(part, 1, val)
				if err != nil {
					t.Fatal(err)
				}
				o := origin(part)
				o2 := origin(inner)
				loadertest.CheckWrapped(t, inner, f, c.Want|loader.CapDigest, func(i int64) int64 { return o(o2(i)) })
				if inner.Close(); !f.Closed() {
					t.Error("closing the part does not close the source")
				}
			})
		}
	}
}

// masked declares the capabilities it is given, whatever its source has.
type masked struct {
	loader.Wrapper
	caps loader.Cap
}

func (m *masked) Caps() loader.Cap { return m.caps }

// TestSplitEveryCapSet: a part has whatever set of capabilities its
// source declares, all 128 of them, and CapDigest.
func TestSplitEveryCapSet(t *testing.T) {
	cases := map[string]loadertest.CapCase{}
	for _, c := range loadertest.CapCases() {
		cases[c.Name] = c
	}
	all := loader.CapNamer | loader.CapLabeler | loader.CapSized | loader.CapShardOrder | loader.CapPrefetch | loader.CapDecoder | loader.CapDigest
	for caps := range all + 1 {
		// A source of images of varying size without CapSized could not
		// be split (nor streamed): keep the sizes fixed without it.
		c := cases["all-fixed"]
		if caps.Has(loader.CapSized) {
			c = cases["all"]
		}
		src, f := c.New(t)
		part, err := loader.Split(&masked{loader.Wrap(src), caps}, 2, true)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(caps.String(), func(t *testing.T) {
			loadertest.CheckWrapped(t, part, f, caps|loader.CapDigest, origin(part))
		})
		part.Close()
	}
}

// TestSplitAllocs: reading a part allocates nothing more than reading its
// source, with either Sample or SampleSized.
func TestSplitAllocs(t *testing.T) {
	for _, c := range loadertest.CapCases() {
		src, _ := c.New(t)
		part, err := loader.Split(src, 2, false)
		if err != nil {
			t.Fatal(err)
		}
		scratch := make([]byte, 64)
		ss := part.(loader.SizedSource) // its method, whatever its capabilities
		var i int64
		if n := loadertest.AllocsPerRun(100, func() {
			part.Sample(i%part.Len(), scratch)
			ss.SampleSized(i%part.Len(), scratch, nil)
			i++
		}); n != 0 {
			t.Errorf("%s: %v allocations per sample", c.Name, n)
		}
		part.Close()
	}
}

// TestStreamSplitOfSized: a stream of a part of images of varying size
// opens (the loader asks the part's capabilities), and of a part of a
// source of fixed-size images that happens to be a SizedSource too.
func TestStreamSplitOfSized(t *testing.T) {
	cases := map[string]loadertest.CapCase{}
	for _, c := range loadertest.CapCases() {
		cases[c.Name] = c
	}
	for name, ops := range map[string]string{"namer+sized": "resize=4,center_crop=2", "sized-fixed": "flip=0.5"} {
		src, _ := cases[name].New(t)
		part, err := loader.Split(src, 2, false)
		if err != nil {
			t.Fatal(err)
		}
		o, err := augment.ParseOps(ops)
		if err != nil {
			t.Fatal(err)
		}
		pipe, err := augment.NewPipeline(part.Spec(), o...)
		if err != nil {
			t.Fatal(err)
		}
		pool := loader.NewPool(2)
		l, err := loader.New(pool, loader.Config{Source: part, Pipeline: pipe, World: 1, BatchSize: 4, Epochs: 1})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var n int
		for {
			b, err := l.Next(t.Context())
			if err != nil {
				break
			}
			n += len(b.Labels)
			b.Release()
		}
		if n != int(part.Len()) {
			t.Errorf("%s: %d samples streamed, want %d", name, n, part.Len())
		}
		l.Close()
		pool.Close()
		part.Close()
	}
}
