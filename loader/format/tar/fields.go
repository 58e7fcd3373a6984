package tar

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/format/internal/options"
)

// Extra fields and label sets (loader.FieldSource) of the webdataset
// layout: fields=EXT,… carries each sample's members of those extensions
// as bytes, labels=EXT reads its classes from one member of several. The
// index already lists every member (the sidecar too), so the fields are
// found at open and read as slices of the same mapping as the image.

// tarField is where one field of one sample lies in its shard; size < 0:
// the sample has no such member.
type tarField struct{ off, size int64 }

// wdsExtras are the webdataset layout's fields= and labels= options.
type wdsExtras struct {
	fields   []string // extensions, without the dot
	maxBytes int64    // maxfieldbytes=
	labels   string   // labels=EXT, with the dot; "" for single-label
}

// extrasOptions parses fields=, maxfieldbytes= and labels=.
func extrasOptions(o *options.Options) (wdsExtras, error) {
	var x wdsExtras
	var err error
	if x.fields, x.maxBytes, err = o.Fields(); err != nil {
		return x, err
	}
	for k, f := range x.fields {
		x.fields[k] = strings.TrimPrefix(f, ".")
	}
	if v := o.Get("labels"); v != "" {
		x.labels = "." + strings.TrimPrefix(v, ".")
	}
	return x, nil
}

// extra records member m of a sample as one of its fields, or its label
// set, if its extension ext (with the dot) names one; it reports whether
// the member is done with: a label set is, a field may be more.
func (t *source) extra(s *tarSample, sh *tarShard, m tarMember, ext string, j int) (bool, error) {
	where := sh.path + "(" + m.name + ")"
	if t.extras.labels != "" && strings.EqualFold(ext, t.extras.labels) {
		text := labelBytes(sh, m)
		set, ok := options.ParseLabelSet(nil, text)
		if text == nil || !ok || len(set) == 0 {
			return true, &loader.RecordError{File: where, Record: int64(j), Err: fmt.Errorf(
				"%w: label set is not one or more small non-negative integers, whitespace or comma separated (at most %d bytes)", loader.ErrLabel, smallMember)}
		}
		s.set = set
		return true, nil
	}
	for f, name := range t.extras.fields {
		if strings.EqualFold(ext, "."+name) {
			if s.fields == nil {
				s.fields = make([]tarField, len(t.extras.fields))
				for k := range s.fields {
					s.fields[k].size = -1
				}
			}
			s.fields[f] = tarField{off: m.off, size: m.size}
			return false, nil // it may be the label or the image too (fields=cls)
		}
	}
	return false, nil
}

// FieldNames implements loader.FieldSource: fields= as given.
func (t *source) FieldNames() []string { return t.extras.fields }

// MultiLabel implements loader.FieldSource: labels= was given.
func (t *source) MultiLabel() bool { return t.extras.labels != "" }

// AppendField implements loader.FieldSource: a copy of the member out of
// the mapped shard. A field over maxfieldbytes= fails the sample, naming
// the member; a missing member is absent.
func (t *source) AppendField(dst []byte, i int64, f int) ([]byte, bool, error) {
	if i < 0 || i >= t.Len() {
		return dst, false, &loader.RecordError{File: t.path, Record: i, Err: loader.ErrIndex}
	}
	s := &t.samples[i]
	if s.fields == nil || s.fields[f].size < 0 {
		return dst, false, nil
	}
	r := s.fields[f]
	sh := &t.shards[s.shard]
	if r.size > t.extras.maxBytes {
		key, _, _ := strings.Cut(path.Base(s.name), ".")
		return dst, false, &loader.RecordError{File: sh.path + "(" + path.Join(path.Dir(s.name), key) + "." + t.extras.fields[f] + ")", Record: i,
			Err: fmt.Errorf("%w: field %q has %d bytes, maxfieldbytes=%d", loader.ErrFieldTooLarge, t.extras.fields[f], r.size, t.extras.maxBytes)}
	}
	if sh.data == nil {
		return dst, false, loader.ErrClosed
	}
	return append(dst, sh.data[r.off:r.off+r.size]...), true, nil
}

// AppendLabels implements loader.FieldSource: the label set read at open.
func (t *source) AppendLabels(dst []int32, i int64) ([]int32, error) {
	if i < 0 || i >= t.Len() {
		return dst, &loader.RecordError{File: t.path, Record: i, Err: loader.ErrIndex}
	}
	return append(dst, t.sample(i).set...), nil
}

// sameSample reports whether two index entries read the same sample.
func sameSample(a, b tarSample) bool {
	return a.name == b.name && a.shard == b.shard && a.label == b.label && a.off == b.off && a.size == b.size &&
		slices.Equal(a.fields, b.fields) && slices.Equal(a.set, b.set)
}

var _ loader.FieldSource = (*source)(nil)
