package loadertest

import (
	"crypto/sha256"
	"fmt"
	"hash"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/sampler"
)

// CapFake is the state of a source of CapCases: CapFakeLen samples, sample
// i labelled i%2 with every pixel byte(i), 2×2×1 pixels, or (i%3+1)×2×1
// when its images vary in size. Which optional interfaces a source of it
// implements is up to the type that wraps it (see CapCases); the methods
// below are what they return.
type CapFake struct {
	varying bool
	order   *sampler.Shards
	decodes atomic.Int64 // calls of Sample and SampleSized
	closed  atomic.Bool

	mu      sync.Mutex
	fetched []int64 // what Prefetch was asked, in order
}

// CapFakeLen is the number of samples of a CapFake.
const CapFakeLen = 12

// capFakeMax bounds a CapFake's images of varying size: 3×2.
const capFakeMax = 6

func (f *CapFake) Len() int64 { return CapFakeLen }
func (f *CapFake) Spec() augment.Spec {
	if f.varying {
		return augment.Spec{C: 1, DType: sample.U8, Layout: sample.HWC}
	}
	return augment.Spec{H: 2, W: 2, C: 1, DType: sample.U8, Layout: sample.HWC}
}
func (f *CapFake) Classes() []string { return []string{"even", "odd"} }
func (f *CapFake) String() string    { return "capfake:" + fmt.Sprint(CapFakeLen) }
func (f *CapFake) Close() error      { f.closed.Store(true); return nil }

// Sample returns sample i at its full size.
func (f *CapFake) Sample(i int64, scratch []byte) (int32, []byte, error) {
	l, pix, _, err := f.SampleSized(i, scratch, nil)
	return l, pix, err
}

// Size returns sample i's h×w.
func (f *CapFake) Size(i int64) (h, w int) {
	if f.varying {
		return int(i%3) + 1, 2
	}
	return 2, 2
}

// SampleSized returns sample i whole at its full size (scale 1).
func (f *CapFake) SampleSized(i int64, scratch []byte, _ loader.Scaler) (int32, []byte, loader.Decoded, error) {
	f.decodes.Add(1)
	if i < 0 || i >= CapFakeLen {
		return 0, nil, loader.Decoded{}, &loader.RecordError{File: f.String(), Record: i, Err: loader.ErrIndex}
	}
	h, w := f.Size(i)
	pix := scratch[:h*w]
	for k := range pix {
		pix[k] = byte(i)
	}
	return int32(i % 2), pix, loader.WholeImage(h, w, 1), nil
}

// MaxPixels bounds h·w.
func (f *CapFake) MaxPixels() int64 {
	if f.varying {
		return capFakeMax
	}
	return 4
}

// Name names sample i as "img<i>".
func (f *CapFake) Name(i int64) string { return fmt.Sprint("img", i) }

// Label returns sample i's label without decoding it.
func (f *CapFake) Label(i int64) (int32, error) { return int32(i % 2), nil }

// ShardOrder is three shards of four samples.
func (f *CapFake) ShardOrder() *sampler.Shards { return f.order }

// Prefetch records indices.
func (f *CapFake) Prefetch(indices []int64) {
	f.mu.Lock()
	f.fetched = append(f.fetched, indices...)
	f.mu.Unlock()
}

// Fetched returns and forgets what Prefetch was asked.
func (f *CapFake) Fetched() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	got := f.fetched
	f.fetched = nil
	return got
}

// Decoder names the fake's decoder, "fake".
func (f *CapFake) Decoder() string { return "fake" }

// Digest writes the fake's digest, "capfake".
func (f *CapFake) Digest(h hash.Hash) error {
	loader.DigestString(h, "capfake")
	return nil
}

// Decodes returns the calls of Sample and SampleSized so far.
func (f *CapFake) Decodes() int64 { return f.decodes.Load() }

// Closed reports whether Close was called.
func (f *CapFake) Closed() bool { return f.closed.Load() }

// The sources of CapCases: base is a plain Source, each mixin adds one
// optional interface of the CapFake it points to.
type (
	base        struct{ f *CapFake }
	namerMix    struct{ f *CapFake }
	labelerMix  struct{ f *CapFake }
	sizedMix    struct{ f *CapFake }
	shardMix    struct{ f *CapFake }
	decoderMix  struct{ f *CapFake }
	digestMix   struct{ f *CapFake }
	plainSource struct{ base }
	namedSource struct {
		base
		namerMix
	}
	labeledSource struct {
		base
		labelerMix
	}
	sizedSource struct {
		base
		sizedMix
	}
	namedSizedSource struct {
		base
		namerMix
		sizedMix
	}
	shardedSource struct {
		base
		shardMix
	}
	decoderSource struct {
		base
		decoderMix
	}
	digestSource struct {
		base
		digestMix
	}
	allSource struct {
		base
		namerMix
		labelerMix
		sizedMix
		shardMix
		decoderMix
		digestMix
	}
)

// base has only Source's methods of the CapFake.
func (b base) Len() int64         { return b.f.Len() }
func (b base) Spec() augment.Spec { return b.f.Spec() }
func (b base) Classes() []string  { return b.f.Classes() }
func (b base) String() string     { return b.f.String() }
func (b base) Close() error       { return b.f.Close() }
func (b base) Sample(i int64, scratch []byte) (int32, []byte, error) {
	return b.f.Sample(i, scratch)
}

func (m namerMix) Name(i int64) string            { return m.f.Name(i) }
func (m labelerMix) Label(i int64) (int32, error) { return m.f.Label(i) }
func (m sizedMix) MaxPixels() int64               { return m.f.MaxPixels() }
func (m sizedMix) SampleSized(i int64, scratch []byte, s loader.Scaler) (int32, []byte, loader.Decoded, error) {
	return m.f.SampleSized(i, scratch, s)
}
func (m shardMix) ShardOrder() *sampler.Shards { return m.f.ShardOrder() }
func (m shardMix) Prefetch(indices []int64)    { m.f.Prefetch(indices) }
func (m decoderMix) Decoder() string           { return m.f.Decoder() }
func (m digestMix) Digest(h hash.Hash) error   { return m.f.Digest(h) }

// CapCase is a source type with a known set of capabilities, for the
// tests of wrappers (loader.Split, the decoded cache).
type CapCase struct {
	Name string
	Want loader.Cap // what loader.Caps says of a source of it
	// New returns a fresh source of the case and its state.
	New func(t testing.TB) (loader.Source, *CapFake)
}

// CapCases are the combinations of optional interfaces the tests of
// wrappers run over: none, each alone, the named-and-sized pair, all,
// and a SizedSource of fixed-size images, which is no CapSized.
func CapCases() []CapCase {
	mk := func(varying bool, wrap func(*CapFake) loader.Source) func(t testing.TB) (loader.Source, *CapFake) {
		return func(t testing.TB) (loader.Source, *CapFake) {
			t.Helper()
			order, err := sampler.NewShards([]sampler.Run{{Start: 0, Len: 4, Shard: 0}, {Start: 4, Len: 4, Shard: 1}, {Start: 8, Len: 4, Shard: 2}}, 1)
			if err != nil {
				t.Fatal(err)
			}
			f := &CapFake{varying: varying, order: order}
			return wrap(f), f
		}
	}
	all := loader.CapNamer | loader.CapLabeler | loader.CapSized | loader.CapShardOrder | loader.CapPrefetch | loader.CapDecoder | loader.CapDigest
	return []CapCase{
		{"none", 0, mk(false, func(f *CapFake) loader.Source { return plainSource{base{f}} })},
		{"namer", loader.CapNamer, mk(false, func(f *CapFake) loader.Source { return namedSource{base{f}, namerMix{f}} })},
		{"labeler", loader.CapLabeler, mk(false, func(f *CapFake) loader.Source { return labeledSource{base{f}, labelerMix{f}} })},
		{"sized", loader.CapSized, mk(true, func(f *CapFake) loader.Source { return sizedSource{base{f}, sizedMix{f}} })},
		{"sized-fixed", 0, mk(false, func(f *CapFake) loader.Source { return sizedSource{base{f}, sizedMix{f}} })},
		{"namer+sized", loader.CapNamer | loader.CapSized, mk(true, func(f *CapFake) loader.Source {
			return namedSizedSource{base{f}, namerMix{f}, sizedMix{f}}
		})},
		{"shard-order+prefetch", loader.CapShardOrder | loader.CapPrefetch, mk(false, func(f *CapFake) loader.Source {
			return shardedSource{base{f}, shardMix{f}}
		})},
		{"decoder", loader.CapDecoder, mk(false, func(f *CapFake) loader.Source { return decoderSource{base{f}, decoderMix{f}} })},
		{"digest", loader.CapDigest, mk(false, func(f *CapFake) loader.Source { return digestSource{base{f}, digestMix{f}} })},
		{"all", all, mk(true, func(f *CapFake) loader.Source {
			return allSource{base{f}, namerMix{f}, labelerMix{f}, sizedMix{f}, shardMix{f}, decoderMix{f}, digestMix{f}}
		})},
		{"all-fixed", all &^ loader.CapSized, mk(false, func(f *CapFake) loader.Source {
			return allSource{base{f}, namerMix{f}, labelerMix{f}, sizedMix{f}, shardMix{f}, decoderMix{f}, digestMix{f}}
		})},
	}
}

// CheckWrapped checks a wrapper w of a CapCase's source, whose sample i
// is the fake's sample origin(i): loader.Caps(w) is want, loader.As finds
// each capability in want and no other, each one it finds answers as the
// fake does for origin(i), and Sample reads the fake's samples.
func CheckWrapped(t *testing.T, w loader.Source, f *CapFake, want loader.Cap, origin func(i int64) int64) {
	t.Helper()
	if got := loader.Caps(w); got != want {
		t.Errorf("Caps = %v, want %v", got, want)
	}
	namer, okN := loader.As[loader.Namer](w)
	labeler, okL := loader.As[loader.Labeler](w)
	sized, okS := loader.As[loader.SizedSource](w)
	orderer, okO := loader.As[loader.ShardOrderer](w)
	pf, okP := loader.As[loader.Prefetcher](w)
	dec, okD := loader.As[loader.DecoderNamer](w)
	dig, okG := loader.As[loader.Digester](w)
	for _, c := range []struct {
		cap loader.Cap
		ok  bool
	}{{loader.CapNamer, okN}, {loader.CapLabeler, okL}, {loader.CapSized, okS},
		{loader.CapShardOrder, okO}, {loader.CapPrefetch, okP}, {loader.CapDecoder, okD}, {loader.CapDigest, okG}} {
		if c.ok != want.Has(c.cap) {
			t.Errorf("As finds %v: %v, want %v", c.cap, c.ok, want.Has(c.cap))
		}
	}
	n := w.Len()
	scratch := make([]byte, capFakeMax)
	for i := range n {
		o := origin(i)
		l, pix, err := w.Sample(i, scratch)
		if h, wd := f.Size(o); err != nil || l != int32(o%2) || len(pix) != h*wd || pix[0] != byte(o) {
			t.Errorf("Sample(%d) = %d, %v, %v; want the fake's sample %d", i, l, pix, err, o)
		}
		if okN && namer.Name(i) != f.Name(o) {
			t.Errorf("Name(%d) = %q, want %q", i, namer.Name(i), f.Name(o))
		}
		if okL {
			before := f.Decodes()
			if l, err := labeler.Label(i); err != nil || l != int32(o%2) || f.Decodes() != before {
				t.Errorf("Label(%d) = %d, %v after %d decodes; want %d without decoding", i, l, err, f.Decodes()-before, o%2)
			}
		}
		if okS {
			l, pix, dec, err := sized.SampleSized(i, scratch, nil)
			if fh, fw := f.Size(o); err != nil || l != int32(o%2) || dec != loader.WholeImage(fh, fw, 1) || len(pix) != fh*fw || pix[0] != byte(o) {
				t.Errorf("SampleSized(%d) = %d, %d bytes, %+v, %v; want the fake's sample %d", i, l, len(pix), dec, err, o)
			}
		}
	}
	if okS && sized.MaxPixels() != f.MaxPixels() {
		t.Errorf("MaxPixels = %d, want %d", sized.MaxPixels(), f.MaxPixels())
	}
	if okO {
		var covered int64
		if so := orderer.ShardOrder(); so != nil {
			for _, r := range so.Runs() {
				covered += r.Len
			}
		}
		if covered != n {
			t.Errorf("ShardOrder covers %d samples, want %d", covered, n)
		}
	}
	if okP && n > 0 {
		f.Fetched()
		pf.Prefetch([]int64{0, n - 1})
		if got, wantF := f.Fetched(), []int64{origin(0), origin(n - 1)}; !slices.Equal(got, wantF) {
			t.Errorf("Prefetch(0, %d): the fake was asked %v, want %v", n-1, got, wantF)
		}
	}
	if okD && dec.Decoder() != "fake" {
		t.Errorf("Decoder = %q, want fake", dec.Decoder())
	}
	if okG {
		if err := dig.Digest(sha256.New()); err != nil {
			t.Errorf("Digest: %v", err)
		}
	}
}
