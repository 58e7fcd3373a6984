package loader

import (
	"hash"
	"strconv"
	"strings"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/sampler"
)

// DecoderNamer is implemented by sources that decode encoded images: it
// names their JPEG decoder ("turbo", "go"), "" when they decode none.
type DecoderNamer interface {
	Decoder() string
}

// Cap is a set of the optional interfaces a Source really implements: its
// capabilities (see Caps).
type Cap uint16

// The capabilities, one per optional interface.
const (
	CapNamer      Cap = 1 << iota // Namer
	CapLabeler                    // Labeler: labels without decoding
	CapSized                      // SizedSource, and the images vary in size (Spec H = W = 0)
	CapShardOrder                 // ShardOrderer
	CapPrefetch                   // Prefetcher
	CapDecoder                    // DecoderNamer
	CapDigest                     // Digester
	CapFields                     // FieldSource: extra fields or label sets
)

var capNames = [...]string{"namer", "labeler", "sized", "shard-order", "prefetch", "decoder", "digest", "fields"}

// Has reports whether c holds every capability of x.
func (c Cap) Has(x Cap) bool { return c&x == x }

// String lists the capabilities as "namer|sized", "none" for none.
func (c Cap) String() string {
	var b strings.Builder
	for k, name := range capNames {
		if c&(1<<k) != 0 {
			if b.Len() > 0 {
				b.WriteByte('|')
			}
			b.WriteString(name)
		}
	}
	if rest := c &^ (1<<len(capNames) - 1); rest != 0 {
		if b.Len() > 0 {
			b.WriteByte('|')
		}
		b.WriteString("0x" + strconv.FormatUint(uint64(rest), 16))
	}
	if b.Len() == 0 {
		return "none"
	}
	return b.String()
}

// capped is a source that says its capabilities itself: a Wrapper, whose
// method set holds every optional interface whatever it wraps.
type capped interface {
	Caps() Cap
}

// Caps returns the capabilities of src: those a Wrapper (a Split part, a
// decoded cache) took from the source it wraps, computed when it was
// made; for any other source, the optional interfaces its type
// implements, CapSized only when its Spec says its images vary in size.
func Caps(src Source) Cap {
	if w, ok := src.(capped); ok {
		return w.Caps()
	}
	var c Cap
	if _, ok := src.(Namer); ok {
		c |= CapNamer
	}
	if _, ok := src.(Labeler); ok {
		c |= CapLabeler
	}
	if _, ok := src.(SizedSource); ok && varying(src.Spec()) {
		c |= CapSized
	}
	if _, ok := src.(ShardOrderer); ok {
		c |= CapShardOrder
	}
	if _, ok := src.(Prefetcher); ok {
		c |= CapPrefetch
	}
	if _, ok := src.(DecoderNamer); ok {
		c |= CapDecoder
	}
	if _, ok := src.(Digester); ok {
		c |= CapDigest
	}
	if _, ok := src.(FieldSource); ok {
		c |= CapFields
	}
	return c
}

// varying reports whether a spec is of images of varying size.
func varying(s augment.Spec) bool { return s.H == 0 && s.W == 0 }

// capOf is the capability of the optional interface T, 0 for any other
// type.
func capOf[T any]() Cap {
	switch any((*T)(nil)).(type) {
	case *Namer:
		return CapNamer
	case *Labeler:
		return CapLabeler
	case *SizedSource:
		return CapSized
	case *ShardOrderer:
		return CapShardOrder
	case *Prefetcher:
		return CapPrefetch
	case *DecoderNamer:
		return CapDecoder
	case *Digester:
		return CapDigest
	case *FieldSource:
		return CapFields
	}
	return 0
}

// As returns src as the optional interface T (Namer, Labeler,
// SizedSource, ShardOrderer, Prefetcher, DecoderNamer, Digester) when
// src has that capability (see Caps). Ask with As, not with a type
// assertion: a
// Wrapper has every method of every optional interface, and only its
// capabilities say which of them its source really has. For a T that is
// no capability, As is the type assertion.
func As[T any](src Source) (T, bool) {
	t, ok := src.(T)
	if !ok {
		return t, false
	}
	c := capOf[T]()
	if w, wrapped := src.(capped); wrapped && c != 0 {
		ok = w.Caps().Has(c)
	} else if c == CapSized {
		ok = varying(src.Spec())
	}
	if !ok {
		var zero T
		return zero, false
	}
	return t, true
}

// Wrapper is the part of a source that wraps another (a Split part, a
// decoded cache) that passes the wrapped source's capabilities on. A
// wrapper type embeds a Wrapper made by Wrap and overrides only what it
// changes (Sample, Len, String, …); the rest passes through. Its method
// set holds every optional interface, but Caps, and so Caps(wrapper) and
// As, report exactly those of the wrapped source: a wrapper of a source
// that is no Namer is no Namer either, though it has a Name method.
//
// Each method of an optional interface calls the wrapped source's,
// found when Wrap was called (no type assertion per call, no
// allocation); where the wrapped source lacks the interface it does what
// a caller that checked the capabilities would have done itself: Name
// names the sample as SOURCE#INDEX, Label reads it through Sample,
// MaxPixels is the Spec's H·W, SampleSized reads the whole image through
// Sample, ShardOrder is nil, Prefetch does nothing, Decoder is "" and
// Digest writes nothing.
// An overriding method reaches the wrapped source's through the embedded
// field: w.Wrapper.SampleSized(j, scratch, want).
//
// A Wrapper does not change after Wrap: it is safe for concurrent use as
// the wrapped source is.
type Wrapper struct {
	src  Source
	caps Cap
	// The wrapped source as each optional interface its type implements,
	// nil where its type lacks it (a wrapped Wrapper implements them all
	// and handles its own lacks); sized is never nil, so that SampleSized
	// is one call.
	namer   Namer
	labeler Labeler
	sized   SizedSource
	orderer ShardOrderer
	pf      Prefetcher
	dec     DecoderNamer
	dig     Digester
	fields  FieldSource
}

// Wrap returns the Wrapper of src, for a wrapper type to embed.
func Wrap(src Source) Wrapper {
	w := Wrapper{src: src, caps: Caps(src)}
	w.namer, _ = src.(Namer)
	w.labeler, _ = src.(Labeler)
	var ok bool
	if w.sized, ok = src.(SizedSource); !ok {
		w.sized = wholeSample{src}
	}
	w.orderer, _ = src.(ShardOrderer)
	w.pf, _ = src.(Prefetcher)
	w.dec, _ = src.(DecoderNamer)
	w.dig, _ = src.(Digester)
	w.fields, _ = src.(FieldSource)
	return w
}

// Unwrap returns the wrapped source.
func (w *Wrapper) Unwrap() Source { return w.src }

// Caps returns the wrapped source's capabilities (see Caps).
func (w *Wrapper) Caps() Cap { return w.caps }

// Len returns the wrapped source's length.
func (w *Wrapper) Len() int64 { return w.src.Len() }

// Spec returns the wrapped source's pixel spec.
func (w *Wrapper) Spec() augment.Spec { return w.src.Spec() }

// Classes returns the wrapped source's classes.
func (w *Wrapper) Classes() []string { return w.src.Classes() }

// Sample returns the wrapped source's sample i.
func (w *Wrapper) Sample(i int64, scratch []byte) (int32, []byte, error) {
	return w.src.Sample(i, scratch)
}

// String names the wrapped source.
func (w *Wrapper) String() string { return w.src.String() }

// Close closes the wrapped source.
func (w *Wrapper) Close() error { return w.src.Close() }

// Name implements Namer: the wrapped source's name of sample i, or
// SOURCE#i.
func (w *Wrapper) Name(i int64) string {
	if w.namer != nil {
		return w.namer.Name(i)
	}
	return w.src.String() + "#" + strconv.FormatInt(i, 10)
}

// Label implements Labeler: the wrapped source's label of sample i,
// through Sample (into a scratch of its own) when it is no Labeler.
func (w *Wrapper) Label(i int64) (int32, error) {
	if w.labeler != nil {
		return w.labeler.Label(i)
	}
	label, _, err := w.src.Sample(i, make([]byte, scratchBytes(w.src)))
	return label, err
}

// MaxPixels implements SizedSource: the wrapped source's bound, or its
// Spec's H·W.
func (w *Wrapper) MaxPixels() int64 { return w.sized.MaxPixels() }

// SampleSized implements SizedSource: the wrapped source's, or its
// Sample at the Spec's size, whole at scale 1.
func (w *Wrapper) SampleSized(i int64, scratch []byte, want Scaler) (int32, []byte, Decoded, error) {
	return w.sized.SampleSized(i, scratch, want)
}

// wholeSample is a Source that is no SizedSource as one: its Sample at
// the Spec's size, whole at scale 1.
type wholeSample struct{ Source }

func (s wholeSample) MaxPixels() int64 {
	spec := s.Spec()
	return int64(spec.H) * int64(spec.W)
}

func (s wholeSample) SampleSized(i int64, scratch []byte, _ Scaler) (int32, []byte, Decoded, error) {
	label, pix, err := s.Sample(i, scratch)
	spec := s.Spec()
	return label, pix, WholeImage(spec.H, spec.W, 1), err
}

// ShardOrder implements ShardOrderer: the wrapped source's order, or nil.
func (w *Wrapper) ShardOrder() *sampler.Shards {
	if w.orderer != nil {
		return w.orderer.ShardOrder()
	}
	return nil
}

// Prefetch implements Prefetcher: the wrapped source prefetches indices,
// if it does.
func (w *Wrapper) Prefetch(indices []int64) {
	if w.pf != nil {
		w.pf.Prefetch(indices)
	}
}

// Decoder implements DecoderNamer: the wrapped source's decoder, or "".
func (w *Wrapper) Decoder() string {
	if w.dec != nil {
		return w.dec.Decoder()
	}
	return ""
}

// Digest implements Digester: the wrapped source's digest, or nothing.
func (w *Wrapper) Digest(h hash.Hash) error {
	if w.dig != nil {
		return w.dig.Digest(h)
	}
	return nil
}

// FieldNames implements FieldSource: the wrapped source's, or none.
func (w *Wrapper) FieldNames() []string {
	if w.fields != nil {
		return w.fields.FieldNames()
	}
	return nil
}

// AppendField implements FieldSource: the wrapped source's field, or
// absent.
func (w *Wrapper) AppendField(dst []byte, i int64, f int) ([]byte, bool, error) {
	if w.fields != nil {
		return w.fields.AppendField(dst, i, f)
	}
	return dst, false, nil
}

// MultiLabel implements FieldSource: the wrapped source's, or false.
func (w *Wrapper) MultiLabel() bool { return w.fields != nil && w.fields.MultiLabel() }

// AppendLabels implements FieldSource: the wrapped source's label set,
// or dst unchanged.
func (w *Wrapper) AppendLabels(dst []int32, i int64) ([]int32, error) {
	if w.fields != nil {
		return w.fields.AppendLabels(dst, i)
	}
	return dst, nil
}

var (
	_ FieldSource  = (*Wrapper)(nil)
	_ SizedSource  = (*Wrapper)(nil)
	_ Namer        = (*Wrapper)(nil)
	_ Labeler      = (*Wrapper)(nil)
	_ ShardOrderer = (*Wrapper)(nil)
	_ Prefetcher   = (*Wrapper)(nil)
	_ DecoderNamer = (*Wrapper)(nil)
	_ Digester     = (*Wrapper)(nil)
)
