package loader

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"

	"github.com/loaderd/loaderd/sampler"
)

// ErrSampler reports a sampler= or samples= option that cannot be used:
// an unknown sampler, a bad draw count, a weights file that cannot be
// read or holds a bad weight, or a sampler combined with an order.
var ErrSampler = errors.New("invalid sampler")

// Weighter is implemented by a source opened with sampler=balanced or
// sampler=weighted:FILE: New draws a shuffling stream's epochs from its
// Weights (sampler.Distributed.Weights). Find it with WeightsOf; like
// Orderer, a Wrapper does not pass it on, since the draws belong to the
// stream plan, not to the samples.
type Weighter interface {
	Weights() *sampler.Weights
}

// WeightsOf returns the weights src was opened with: those of the
// outermost Weighter in its stack of wrappers (Unwrap), nil when none.
func WeightsOf(src Source) *sampler.Weights {
	for src != nil {
		if w, ok := src.(Weighter); ok {
			return w.Weights()
		}
		u, ok := src.(interface{ Unwrap() Source })
		if !ok {
			break
		}
		src = u.Unwrap()
	}
	return nil
}

// samplerOption is sampler= and samples= as given.
type samplerOption struct {
	kind    string // "", "balanced" or "weighted"
	file    string // weighted's FILE
	samples int64  // draws per epoch; 0: the dataset's size
}

func (o samplerOption) String() string {
	s := "sampler=" + o.kind
	if o.kind == "weighted" {
		s += ":" + url.QueryEscape(o.file)
	}
	if o.samples > 0 {
		s += "&samples=" + strconv.FormatInt(o.samples, 10)
	}
	return s
}

// takeSampler takes sampler= and samples= out of PATH?OPTIONS and returns
// the rest.
func takeSampler(rest string) (string, samplerOption, error) {
	var o samplerOption
	path, query, ok := strings.Cut(rest, "?")
	if !ok {
		return rest, o, nil
	}
	var keep []string
	for _, kv := range strings.Split(query, "&") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "sampler":
			u, err := url.QueryUnescape(v)
			if err != nil {
				return "", o, fmt.Errorf("%w: sampler=%s: %v", ErrSampler, v, err)
			}
			kind, file, _ := strings.Cut(u, ":")
			switch {
			case u == "balanced":
				o.kind = u
			case kind == "weighted" && file != "":
				o.kind, o.file = kind, file
			default:
				return "", o, fmt.Errorf("%w: sampler=%s: want balanced or weighted:FILE", ErrSampler, v)
			}
		case "samples":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 1 || n > sampler.MaxN {
				return "", o, fmt.Errorf("%w: samples=%s: want the draws per epoch, 1..2^62", ErrSampler, v)
			}
			o.samples = n
		default:
			keep = append(keep, kv)
		}
	}
	if o.samples > 0 && o.kind == "" {
		return "", o, fmt.Errorf("%w: samples=%d needs sampler=balanced or sampler=weighted:FILE", ErrSampler, o.samples)
	}
	if len(keep) > 0 {
		path += "?" + strings.Join(keep, "&")
	}
	return path, o, nil
}

// withSampler wraps src, opened with order, in the weights that o asks
// for, unless o is empty. On error it closes src.
func withSampler(src Source, order sampler.Order, o samplerOption) (Source, error) {
	if o.kind == "" {
		return src, nil
	}
	w, err := samplerWeights(src, order, o)
	if err != nil {
		src.Close()
		return nil, err
	}
	return &weighted{Wrapper: Wrap(src), w: w, opt: o}, nil
}

func samplerWeights(src Source, order sampler.Order, o samplerOption) (*sampler.Weights, error) {
	if order != sampler.Uniform {
		return nil, fmt.Errorf("%w: %v excludes order=%v: weighted draws have no order", ErrSampler, o, order)
	}
	if so, ok := As[ShardOrderer](src); ok && so.ShardOrder() != nil {
		return nil, fmt.Errorf("%w: %v excludes order=shards: weighted draws read samples at random, not shard by shard", ErrSampler, o)
	}
	var w []float64
	var err error
	if o.kind == "balanced" {
		w, err = balancedWeights(src)
	} else {
		w, err = readWeights(o.file, src.Len())
	}
	if err != nil {
		return nil, err
	}
	t, err := sampler.NewWeights(w, o.samples)
	if err != nil {
		return nil, fmt.Errorf("%w: %v: %w", ErrSampler, o, err)
	}
	return t, nil
}

// balancedWeights weighs each sample 1/(count of its class), reading
// every label once as Split does: through Label where src is a Labeler
// (folder, tar, Arrow, Parquet: an index, no decoding), through Sample
// otherwise (CIFAR: a view of the mapped record; synthetic: generated).
func balancedWeights(src Source) ([]float64, error) {
	n := src.Len()
	if n > sampler.MaxWeighted {
		return nil, fmt.Errorf("%w: sampler=balanced: %d samples, at most 2^32", ErrSampler, n)
	}
	labels := make([]int32, 0, n)
	var counts []int64
	err := scanLabels(src, func(_ int64, l int32) {
		labels = append(labels, l)
		if int(l) >= len(counts) {
			counts = append(counts, make([]int64, int(l)+1-len(counts))...)
		}
		counts[l]++
	})
	if err != nil {
		return nil, err
	}
	w := make([]float64, n)
	for i, l := range labels {
		w[i] = 1 / float64(counts[l])
	}
	return w, nil
}

// weighted is a source opened with sampler=: its source unchanged, with
// the weights to draw it by.
type weighted struct {
	Wrapper
	w   *sampler.Weights
	opt samplerOption
}

// Weights implements Weighter.
func (w *weighted) Weights() *sampler.Weights { return w.w }

// String names the source with its sampler, as it was opened.
func (w *weighted) String() string {
	s := w.Unwrap().String()
	sep := "?"
	if strings.Contains(s, "?") {
		sep = "&"
	}
	return s + sep + w.opt.String()
}

// checkWeight reports a weight that is not a finite number ≥ 0.
func checkWeight(x float64) error {
	if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
		return fmt.Errorf("weight %v: want a finite number ≥ 0", x)
	}
	return nil
}
