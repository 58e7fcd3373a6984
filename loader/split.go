package loader

import (
	"errors"
	"fmt"
	"hash"
	"math"
	"slices"
	"sort"
	"strconv"
	"sync"

	"github.com/loaderd/loaderd/sampler"
)

// ErrSplit reports a hold-out that cannot be made (a class too small).
var ErrSplit = errors.New("invalid split")

// Labeler is implemented by sources that know a sample's label without
// decoding its pixels (an index of a tar, a label column of a table). Split
// uses it to scan a dataset's labels in microseconds instead of decoding
// every image; a source without it is scanned through Sample.
type Labeler interface {
	Label(i int64) (int32, error)
}

// Split returns one part of src: with val set, the last holdoutPerClass
// samples of every class in index order (the validation part); otherwise
// all the others (the training part). SplitFraction holds out a share of
// each class instead. Both parts keep src's index order,
// classes and pixel spec, so a class-sorted folder of CIFAR-10 with
// holdout 1000 gives 40,000 training and 10,000 validation images, the
// same ones on every run.
//
// Split reads every label once, through Label if src is a Labeler and
// through Sample otherwise, and keeps only the held-out indices (classes ×
// holdout of them), whichever part is asked for. The part owns src: its
// Close closes src. Its method Origin(i int64) int64 maps a part's index
// back to src's. Errors from src (which name the file and record) are
// returned as they are.
//
// A part is a Wrapper of src: it has src's capabilities (see Caps), each
// through Origin. A part of a Namer is a Namer; a part of a SizedSource
// whose images vary in size is a SizedSource, so it streams through the
// resize and crop ops as its source does; a part of a ShardOrderer has
// the source's order restricted to the part (each source run keeps its
// shard, its part's samples still consecutive indices, since the part
// numbers its samples in the source's order); a part of a Prefetcher
// prefetches the source's indices of its own. Label works on every part,
// through Sample where src is no Labeler. A part is a Digester whatever
// src is (CapDigest besides src's capabilities): its Digest adds which
// part it is to src's, so that the two parts, and other holdouts, never
// share a Fingerprint.
func Split(src Source, holdoutPerClass int, val bool) (Source, error) {
	if holdoutPerClass < 0 {
		return nil, fmt.Errorf("loader: split %s: holdout %d per class is negative: %w", src, holdoutPerClass, ErrSplit)
	}
	held, err := holdout(src, holdoutPerClass)
	if err != nil {
		return nil, err
	}
	return split(src, held, val, strconv.Itoa(holdoutPerClass))
}

// SplitFraction is Split holding out a fraction of every class rather
// than a count: the last round(frac·n) samples of a class of n, at least
// one, 0 < frac < 1 (holdout=0.1 of loader.Open). It keeps one label per
// sample (4 bytes) while it scans, since a class's share is known only
// at the end.
func SplitFraction(src Source, frac float64, val bool) (Source, error) {
	if !(frac > 0 && frac < 1) {
		return nil, fmt.Errorf("loader: split %s: holdout fraction %g is not between 0 and 1: %w", src, frac, ErrSplit)
	}
	held, err := holdoutFraction(src, frac)
	if err != nil {
		return nil, err
	}
	return split(src, held, val, strconv.FormatFloat(frac, 'g', -1, 64))
}

// split makes the part of src given the sorted held-out indices; hold is
// the holdout= value, for String.
func split(src Source, held []int64, val bool, hold string) (Source, error) {
	n := int64(len(held))
	if !val {
		n = src.Len() - n
	}
	part := &splitSource{Wrapper: Wrap(src), held: held, val: val, n: n, hold: hold}
	if order := part.Wrapper.ShardOrder(); order != nil {
		var err error
		if part.order, err = part.shards(order); err != nil {
			return nil, fmt.Errorf("loader: split %s: %w", src, err)
		}
	}
	return part, nil
}

// maxSplitClasses bounds the labels of a source that names no classes.
const maxSplitClasses = 1 << 20

// holdout scans the labels and returns, sorted, the last k indices of every
// class, keeping one ring of k indices per class.
func holdout(src Source, k int) ([]int64, error) {
	var rings [][]int64 // ring c holds class c's last k indices
	var counts []int64  // samples seen per class
	err := scanLabels(src, func(i int64, label int32) {
		for int(label) >= len(rings) {
			rings = append(rings, make([]int64, k))
			counts = append(counts, 0)
		}
		if k > 0 {
			rings[label][counts[label]%int64(k)] = i
		}
		counts[label]++
	})
	if err != nil {
		return nil, err
	}
	var held []int64
	var errs []error
	for c, cnt := range counts {
		if cnt <= int64(k) {
			errs = append(errs, fmt.Errorf("class %s has %d samples", className(src, c), cnt))
			continue
		}
		held = append(held, rings[c]...)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("loader: split %s: holdout of %d per class leaves nothing to train on: %w: %w",
			src, k, errors.Join(errs...), ErrSplit)
	}
	slices.Sort(held)
	return held, nil
}

// holdoutFraction returns, sorted, the last round(frac·n) indices (at
// least one) of every class of n samples.
func holdoutFraction(src Source, frac float64) ([]int64, error) {
	labels := make([]int32, 0, src.Len())
	var counts []int64
	err := scanLabels(src, func(_ int64, label int32) {
		for int(label) >= len(counts) {
			counts = append(counts, 0)
		}
		labels = append(labels, label)
		counts[label]++
	})
	if err != nil {
		return nil, err
	}
	want := make([]int64, len(counts)) // still to hold out, per class
	var errs []error
	for c, cnt := range counts {
		want[c] = max(1, int64(math.Round(frac*float64(cnt))))
		if cnt <= want[c] {
			errs = append(errs, fmt.Errorf("class %s has %d samples", className(src, c), cnt))
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("loader: split %s: holdout of %g of each class (at least one) leaves nothing to train on: %w: %w",
			src, frac, errors.Join(errs...), ErrSplit)
	}
	var held []int64
	for i := len(labels) - 1; i >= 0; i-- {
		if c := labels[i]; want[c] > 0 {
			want[c]--
			held = append(held, int64(i))
		}
	}
	slices.Reverse(held)
	return held, nil
}

// scanLabels calls f with every sample's label in index order, through
// Label if src is a Labeler and through Sample otherwise, and checks each
// against the classes.
func scanLabels(src Source, f func(i int64, label int32)) error {
	lab, _ := As[Labeler](src)
	var scratch []byte
	if lab == nil {
		scratch = make([]byte, scratchBytes(src))
	}
	classes := len(src.Classes())
	for i := range src.Len() {
		var label int32
		var err error
		if lab != nil {
			label, err = lab.Label(i)
		} else {
			label, _, err = src.Sample(i, scratch)
		}
		if err != nil {
			return err
		}
		if label < 0 || (classes > 0 && int(label) >= classes) || (classes == 0 && label >= maxSplitClasses) {
			return &RecordError{File: src.String(), Record: i, Err: fmt.Errorf("%w: label %d of %d classes", ErrLabel, label, classes)}
		}
		f(i, label)
	}
	return nil
}

// scratchBytes is the scratch Sample needs: the spec's bytes, or for
// images of varying size the largest image the source admits.
func scratchBytes(src Source) int {
	if ss, ok := As[SizedSource](src); ok {
		return int(ss.MaxPixels()) * src.Spec().C
	}
	return src.Spec().Bytes()
}

func className(src Source, c int) string {
	if names := src.Classes(); c < len(names) {
		return fmt.Sprintf("%d (%s)", c, names[c])
	}
	return fmt.Sprint(c)
}

// splitSource is one part of a Split: a Wrapper of its source, whose
// methods map the part's indices to the source's. It is safe for
// concurrent use as its source is.
type splitSource struct {
	Wrapper
	held []int64 // sorted held-out indices of the source
	val  bool
	n    int64
	hold string // the holdout= value: a count per class or a fraction

	order *sampler.Shards // the source's shard order over the part; nil: uniform
	pfMu  sync.Mutex      // guards pfBuf: streams prefetch concurrently
	pfBuf []int64
}

// below returns the number of held indices below source index x.
func (s *splitSource) below(x int64) int64 {
	return int64(sort.Search(len(s.held), func(j int) bool { return s.held[j] >= x }))
}

// shards restricts the source's shard order to the part: source run
// [a, b) becomes the part's indices of its samples, consecutive because
// Origin is increasing.
func (s *splitSource) shards(src *sampler.Shards) (*sampler.Shards, error) {
	var runs []sampler.Run
	for _, r := range src.Runs() {
		lo, hi := s.below(r.Start), s.below(r.Start+r.Len)
		start, n := lo, hi-lo // val: the held ones
		if !s.val {
			start, n = r.Start-lo, r.Len-(hi-lo)
		}
		if n > 0 {
			runs = append(runs, sampler.Run{Start: start, Len: n, Shard: r.Shard})
		}
	}
	return sampler.NewShards(runs, src.Window())
}

// Caps returns the source's capabilities and CapDigest: the part digests
// its holdout and part even where the source digests nothing.
func (s *splitSource) Caps() Cap { return s.Wrapper.Caps() | CapDigest }

// Digest implements Digester: the source's digest, then the holdout= and
// part= that chose this part of it.
func (s *splitSource) Digest(h hash.Hash) error {
	if err := s.Wrapper.Digest(h); err != nil {
		return err
	}
	DigestString(h, "split")
	DigestString(h, s.hold)
	DigestBool(h, s.val)
	return nil
}

// ShardOrder implements ShardOrderer: the source's shard-shuffle order
// over this part, or nil.
func (s *splitSource) ShardOrder() *sampler.Shards { return s.order }

// Prefetch implements Prefetcher: the source prefetches the part's
// indices, mapped to its own.
func (s *splitSource) Prefetch(indices []int64) {
	if !s.Caps().Has(CapPrefetch) {
		return
	}
	s.pfMu.Lock()
	defer s.pfMu.Unlock()
	buf := s.pfBuf[:0]
	for _, i := range indices {
		if i >= 0 && i < s.n {
			buf = append(buf, s.Origin(i))
		}
	}
	s.pfBuf = buf
	s.Wrapper.Prefetch(buf)
}

// Origin returns the index in the split source of the part's sample i.
func (s *splitSource) Origin(i int64) int64 {
	if s.val {
		return s.held[i]
	}
	// The answer is i + m, m the number of held indices below it: the
	// largest m with held[m−1] − (m−1) ≤ i, since held[j] − j counts the
	// kept indices below held[j].
	m := sort.Search(len(s.held), func(j int) bool { return s.held[j]-int64(j) > i })
	return i + int64(m)
}

// Len returns the number of samples in this part.
func (s *splitSource) Len() int64 { return s.n }

// String names the part as FORMAT:PATH?holdout=K&part=train|val.
func (s *splitSource) String() string {
	part := "train"
	if s.val {
		part = "val"
	}
	return fmt.Sprintf("%s?holdout=%s&part=%s", s.Unwrap(), s.hold, part)
}

// Sample returns the part's sample i (the source's sample Origin(i)).
func (s *splitSource) Sample(i int64, scratch []byte) (int32, []byte, error) {
	if i < 0 || i >= s.n {
		return 0, nil, &RecordError{File: s.String(), Record: i, Err: ErrIndex}
	}
	return s.Wrapper.Sample(s.Origin(i), scratch)
}

// Name implements Namer: the source's name of the part's sample i.
func (s *splitSource) Name(i int64) string { return s.Wrapper.Name(s.Origin(i)) }

// AppendField implements FieldSource: the field of the part's sample i.
func (s *splitSource) AppendField(dst []byte, i int64, f int) ([]byte, bool, error) {
	return s.Wrapper.AppendField(dst, s.Origin(i), f)
}

// AppendLabels implements FieldSource: the label set of the part's sample i.
func (s *splitSource) AppendLabels(dst []int32, i int64) ([]int32, error) {
	return s.Wrapper.AppendLabels(dst, s.Origin(i))
}

// Label implements Labeler: the part's label i, without decoding when
// the source is a Labeler.
func (s *splitSource) Label(i int64) (int32, error) {
	if i < 0 || i >= s.n {
		return 0, &RecordError{File: s.String(), Record: i, Err: ErrIndex}
	}
	return s.Wrapper.Label(s.Origin(i))
}

// SampleSized implements SizedSource: the source's sample Origin(i).
func (s *splitSource) SampleSized(i int64, scratch []byte, want Scaler) (int32, []byte, Decoded, error) {
	if i < 0 || i >= s.n {
		return 0, nil, Decoded{}, &RecordError{File: s.String(), Record: i, Err: ErrIndex}
	}
	return s.sized.SampleSized(s.Origin(i), scratch, want) // Wrapper.SampleSized, one call less
}
