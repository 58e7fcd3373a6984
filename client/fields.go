package client

import "fmt"

// Extra fields and label sets: what a sample carries beside its image and
// its one class, when the dataset names them (fields=, labels=; see the
// daemon's README). The bytes are the dataset's own (a caption, a JSON
// document): the client hands them over undecoded.

// FieldNames returns the stream's extra fields (Header().FieldNames).
func (b *Batch) FieldNames() []string { return b.s.Header().GetFieldNames() }

// Field returns field name of sample k, nil when the sample has none
// (FieldPresent), the stream no such field, or k is out of range. It
// stays valid until Release.
func (b *Batch) Field(name string, k int) []byte {
	v, _ := b.field(name, k)
	return v
}

// FieldPresent reports whether sample k has field name: an absent field
// (a WebDataset sample without that member, a null cell) is not an empty
// one.
func (b *Batch) FieldPresent(name string, k int) bool {
	_, ok := b.field(name, k)
	return ok
}

// field finds sample k's value of field name in the batch's message,
// checking what the daemon sent instead of trusting it.
func (b *Batch) field(name string, k int) ([]byte, bool) {
	n, w := b.Len(), &b.w
	for f, fn := range b.FieldNames() {
		if fn != name {
			continue
		}
		i := f*n + k
		if k < 0 || k >= n || f >= len(w.FieldData) || i >= len(w.FieldEnds) || i >= len(w.FieldPresent) || !w.FieldPresent[i] {
			return nil, false
		}
		lo, hi := uint32(0), w.FieldEnds[i]
		if k > 0 {
			lo = w.FieldEnds[i-1]
		}
		if lo > hi || int(hi) > len(w.FieldData[f]) {
			return nil, false
		}
		return w.FieldData[f][lo:hi:hi], true
	}
	return nil, false
}

// LabelSet returns sample k's classes on a multi-label stream
// (Header().MultiLabel), nil otherwise; Labels[k] is its first. It stays
// valid until Release.
func (b *Batch) LabelSet(k int) []int32 {
	w := &b.w
	if k < 0 || k >= len(w.LabelSetEnds) {
		return nil
	}
	lo, hi := uint32(0), w.LabelSetEnds[k]
	if k > 0 {
		lo = w.LabelSetEnds[k-1]
	}
	if lo > hi || int(hi) > len(w.LabelSets) {
		return nil
	}
	return w.LabelSets[lo:hi:hi]
}

// MultiHot writes the batch's multi-label targets into dst: Len() rows of
// Header().NumClasses float32 values, 1 for each class of the sample's
// label set and 0 elsewhere (what BCEWithLogitsLoss takes); on a
// single-label stream, a one-hot row of Labels. dst must hold
// Len()·NumClasses values; MultiHot allocates nothing.
func (b *Batch) MultiHot(dst []float32) error {
	classes, n := int(b.s.Header().GetNumClasses()), b.Len()
	multi := b.s.Header().GetMultiLabel()
	switch {
	case classes <= 0:
		return fmt.Errorf("client: the daemon did not say the dataset's number of classes (an older daemon?)")
	case len(dst) < n*classes:
		return fmt.Errorf("client: batch %d: MultiHot needs %d values, dst holds %d", b.Seq, n*classes, len(dst))
	case multi && len(b.w.LabelSetEnds) != n:
		return fmt.Errorf("client: batch %d: %d label sets for %d samples", b.Seq, len(b.w.LabelSetEnds), n)
	}
	clear(dst[:n*classes])
	for k := range n {
		set := b.Labels[k : k+1]
		if multi {
			set = b.LabelSet(k)
		}
		for _, c := range set {
			if c < 0 || int(c) >= classes {
				return fmt.Errorf("client: batch %d sample %d: class %d is not in [0, %d)", b.Seq, k, c, classes)
			}
			dst[k*classes+int(c)] = 1
		}
	}
	return nil
}
