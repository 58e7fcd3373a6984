package loader

import (
	"fmt"
	"hash"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/sampler"
)

// Source turns a dataset index into a label and the pixels of one image.
//
// Sample must be safe for concurrent use by many workers. scratch is a
// buffer of at least Spec().Bytes() bytes owned by the calling worker: a
// source that has the pixels in memory already (a mapped CIFAR file)
// returns a view of them and ignores scratch; one that must produce them
// (a decoder, the synthetic source) writes them into scratch and returns it.
// The returned pixels are valid until the worker's next call.
type Source interface {
	// Len returns the number of samples.
	Len() int64
	// Spec describes every sample's pixels: U8, with the source's own layout.
	Spec() augment.Spec
	// Classes returns the class names; a label indexes into it.
	Classes() []string
	// Sample returns the label and pixels of sample i.
	Sample(i int64, scratch []byte) (label int32, pix []byte, err error)
	// String names the source, as FORMAT:PATH.
	String() string
	// Close releases the source's files and mappings.
	Close() error
}

// Namer is implemented by sources that read samples from named files, to
// say where a sample comes from without reading it: so that users can
// trace a sample (a misclassified image, a bad one) back to its file, and
// so that the loader can name a sample in the errors it makes itself
// (ErrFault: a worker faulted reading a mapped file that shrank).
type Namer interface {
	// Name returns the name of sample i, 0 ≤ i < Len(): the path of the
	// file that holds it alone ("DIR/cat/0001.jpg"), an archive member as
	// SHARD(MEMBER) ("shards/train-0.tar(cat/0001.jpg)"), or a record of a
	// file of many as FILE#RECORD, the record counted from 0 in that file
	// ("data_batch_2.bin#4999"). Name reads nothing, is cheap and is safe
	// for concurrent use.
	Name(i int64) string
}

// Digester is implemented by sources that can describe their content
// cheaply, without decoding it, for Fingerprint: so that the clients of a
// pool of daemons can check every daemon serves the same bytes.
type Digester interface {
	// Digest writes into h what identifies the source's content beyond
	// what Fingerprint hashes itself (Len, Spec, Classes, names, labels):
	// its files' sizes and indexes, a hash of small files, the options
	// that change its pixels. It must not depend on where the files are
	// (two copies of a dataset on two hosts digest the same), must cost
	// far less than reading the data, and encodes what it writes
	// unambiguously (DigestString, DigestInt).
	Digest(h hash.Hash) error
}

// Opener opens a source from the PATH[?OPTIONS] part of FORMAT:PATH,
// with holdout= and part= already taken out.
type Opener func(path string) (Source, error)

var (
	formatsMu sync.RWMutex
	formats   = map[string]Opener{}
)

// RegisterFormat makes FORMAT:PATH openable by Open. It is meant to be
// called from the init function of the format's package (see
// loader/format/...), so that importing the package, as image/png does for
// image.Decode, is what makes a format available; registering a format
// twice panics.
func RegisterFormat(name string, open Opener) {
	formatsMu.Lock()
	defer formatsMu.Unlock()
	if _, dup := formats[name]; dup {
		panic("loader: format registered twice: " + name)
	}
	formats[name] = open
}

// Formats returns the registered format names, sorted.
func Formats() []string {
	formatsMu.RLock()
	defer formatsMu.RUnlock()
	names := make([]string, 0, len(formats))
	for n := range formats {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Open opens a source named as FORMAT:PATH[?OPTIONS], e.g.
// "cifar:data/cifar-10-batches-bin" or "synthetic:50000", with the opener
// a format's package registered. A bare FORMAT (such as "synthetic")
// passes an empty path. Options are the format's own (see each format's
// package), plus those every format takes:
//
//	holdout=K     set aside the last K samples of each class (see Split),
//	holdout=F     or, 0 < F < 1, that fraction of each (SplitFraction)
//	part=train    the rest (the default), or part=val: the set-aside part
//	order=torch   shuffle as PyTorch's DistributedSampler does, to the
//	              index (sampler.Torch; see OrderOf); order=torch:legacy
//	              as torch releases before 2025 did; order=uniform is
//	              loaderd's own order, the default
//	sampler=balanced
//	              a shuffling stream draws samples with replacement,
//	              every class equally often (weight 1/class size), or
//	sampler=weighted:FILE
//	              each sample by its weight in FILE: text, one number a
//	              line, or a 1-D float32/float64 .npy (see WeightsOf)
//	samples=K     with sampler=: K draws per epoch (default: the size)
//
// On error the Source is nil, whatever the opener returned with it.
func Open(spec string) (Source, error) {
	format, rest, _ := strings.Cut(spec, ":")
	formatsMu.RLock()
	open, ok := formats[format]
	formatsMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("loader: %q: %w %q (known: %s)", spec, ErrUnknownFormat, format, strings.Join(Formats(), ", "))
	}
	rest, order := takeOrder(rest)
	rest, samp, err := takeSampler(rest)
	if err != nil {
		return nil, fmt.Errorf("loader: %q: %w", spec, err)
	}
	rest, hold, val, err := splitOptions(rest)
	if err != nil {
		return nil, fmt.Errorf("loader: %q: %w", spec, err)
	}
	src, err := guardOpen(func() (Source, error) { return open(rest) })
	if err != nil {
		// Not the opener's value: an interface holding a nil pointer
		// would pass a nil check and panic on Close.
		return nil, err
	}
	if hold.k == 0 && hold.frac == 0 {
		return finishOpen(spec, src, order, samp)
	}
	part, err := guardOpen(func() (Source, error) {
		if hold.frac > 0 {
			return SplitFraction(src, hold.frac, val)
		}
		return Split(src, hold.k, val)
	})
	if err != nil {
		src.Close()
		return nil, err
	}
	return finishOpen(spec, part, order, samp)
}

// finishOpen wraps an opened source in its sampler and order; on error it
// closes src.
func finishOpen(spec string, src Source, order sampler.Order, samp samplerOption) (Source, error) {
	src, err := withSampler(src, order, samp)
	if err != nil {
		return nil, fmt.Errorf("loader: %q: %w", spec, err)
	}
	return withOrder(src, order), nil
}

// holdoutOption is holdout=: k samples per class, or a fraction of each.
type holdoutOption struct {
	k    int
	frac float64
}

// splitOptions takes holdout= and part= out of PATH?OPTIONS and returns
// the rest for the format.
func splitOptions(rest string) (string, holdoutOption, bool, error) {
	var hold holdoutOption
	path, query, ok := strings.Cut(rest, "?")
	if !ok {
		return rest, hold, false, nil
	}
	var keep []string
	val, part := false, ""
	for _, kv := range strings.Split(query, "&") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "holdout":
			if n, err := strconv.Atoi(v); err == nil && n > 0 {
				hold = holdoutOption{k: n}
			} else if f, err := strconv.ParseFloat(v, 64); err == nil && f > 0 && f < 1 {
				hold = holdoutOption{frac: f}
			} else {
				return "", hold, false, fmt.Errorf("holdout=%s: want a number of samples per class (K ≥ 1) or a fraction of each class (0 < F < 1)", v)
			}
		case "part":
			if v != "train" && v != "val" {
				return "", hold, false, fmt.Errorf("part=%s: want train or val", v)
			}
			part, val = v, v == "val"
		default:
			keep = append(keep, kv)
		}
	}
	if part != "" && hold.k == 0 && hold.frac == 0 {
		return "", hold, false, fmt.Errorf("part=%s needs holdout=K or holdout=F", part)
	}
	if len(keep) > 0 {
		path += "?" + strings.Join(keep, "&")
	}
	return path, hold, val, nil
}
