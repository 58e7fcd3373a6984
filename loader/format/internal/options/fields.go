package options

import (
	"strconv"
	"strings"

	"github.com/loaderd/loaderd/loader"
)

// Fields parses fields=A,B (the extra fields to carry: WebDataset member
// extensions for tar, column names for Arrow and Parquet; nil when absent)
// and maxfieldbytes=N (the most bytes one field of one sample may have,
// loader.DefaultMaxFieldBytes when absent). A name given twice is an
// error: the clients find fields by name.
func (o *Options) Fields() (names []string, maxBytes int64, err error) {
	maxBytes = loader.DefaultMaxFieldBytes
	if v := o.vals.Get("maxfieldbytes"); v != "" {
		if maxBytes, err = strconv.ParseInt(v, 10, 64); err != nil || maxBytes <= 0 {
			return nil, 0, o.Errorf("maxfieldbytes=%s: want a positive number of bytes", v)
		}
	}
	v := o.vals.Get("fields")
	if v == "" {
		return nil, maxBytes, nil
	}
	seen := map[string]bool{}
	for _, n := range strings.Split(v, ",") {
		n = strings.TrimSpace(n)
		if n == "" || seen[n] {
			return nil, 0, o.Errorf("fields=%s: want distinct names, comma-separated", v)
		}
		seen[n] = true
		names = append(names, n)
	}
	return names, maxBytes, nil
}

// ParseLabelSet appends the classes of a multi-label text field, ints
// separated by whitespace or commas (WebDataset's convention for a .cls
// of several classes), to dst.
func ParseLabelSet(dst []int32, text []byte) ([]int32, bool) {
	for _, f := range strings.FieldsFunc(string(text), func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' }) {
		v, err := strconv.ParseInt(f, 10, 32)
		if err != nil || v < 0 {
			return dst, false
		}
		dst = append(dst, int32(v))
	}
	return dst, true
}
