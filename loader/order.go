package loader

import (
	"net/url"
	"strings"

	"github.com/loaderd/loaderd/sampler"
)

// Orderer is implemented by a source opened with an order= that every
// format takes (order=torch, order=torch:legacy): New plans a shuffling
// stream's epochs in that order (sampler.Distributed.Order). Find it with
// OrderOf, which looks through wrappers; a Wrapper does not pass it on
// as a method, since the order belongs to the stream plan, not to the
// samples.
type Orderer interface {
	Order() sampler.Order
}

// OrderOf returns the order src was opened with: that of the outermost
// Orderer in its stack of wrappers (Unwrap), sampler.Uniform when none.
func OrderOf(src Source) sampler.Order {
	for src != nil {
		if o, ok := src.(Orderer); ok {
			return o.Order()
		}
		w, ok := src.(interface{ Unwrap() Source })
		if !ok {
			break
		}
		src = w.Unwrap()
	}
	return sampler.Uniform
}

// ordered is a source opened with order=torch or order=torch:legacy: its
// source unchanged, with the order to plan it in.
type ordered struct {
	Wrapper
	order sampler.Order
}

// Order implements Orderer.
func (o *ordered) Order() sampler.Order { return o.order }

// String names the source with its order, as it was opened.
func (o *ordered) String() string {
	s := o.Unwrap().String()
	sep := "?"
	if strings.Contains(s, "?") {
		sep = "&"
	}
	return s + sep + "order=" + o.order.String()
}

// withOrder wraps src in its order, unless that is the uniform default.
func withOrder(src Source, o sampler.Order) Source {
	if o == sampler.Uniform {
		return src
	}
	return &ordered{Wrapper: Wrap(src), order: o}
}

// takeOrder takes order= out of PATH?OPTIONS when it names an order any
// format can be read in (uniform, torch, torch:legacy: a plan of
// indices, which needs nothing of the format) and returns the rest.
// Other values (tar's order=shards:W, which needs shards) stay for the
// format.
func takeOrder(rest string) (string, sampler.Order) {
	path, query, ok := strings.Cut(rest, "?")
	if !ok {
		return rest, sampler.Uniform
	}
	var keep []string
	order := sampler.Uniform
	for _, kv := range strings.Split(query, "&") {
		k, v, _ := strings.Cut(kv, "=")
		if k == "order" {
			if u, err := url.QueryUnescape(v); err == nil {
				if o, err := sampler.ParseOrder(u); err == nil {
					order = o
					continue
				}
			}
		}
		keep = append(keep, kv)
	}
	if len(keep) > 0 {
		path += "?" + strings.Join(keep, "&")
	}
	return path, order
}
