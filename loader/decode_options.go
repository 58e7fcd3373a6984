package loader

import (
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// formatOptions are the options after '?' in FORMAT:PATH?KEY=VALUE&…,
// e.g. "tar:shards/*.tar?size=32x32". Each format names the keys it
// knows; any other key is an error, so a typo is never ignored.
type formatOptions struct {
	format string
	path   string
	vals   url.Values
}

func parseFormatPath(format, spec string, known ...string) (*formatOptions, error) {
	p, query, _ := strings.Cut(spec, "?")
	o := &formatOptions{format: format, path: p}
	if p == "" {
		return nil, fmt.Errorf("loader: %s: no path given (%s:PATH[?OPTIONS])", format, format)
	}
	vals, err := url.ParseQuery(query)
	if err != nil {
		return nil, fmt.Errorf("loader: %s:%s: options: %w", format, spec, err)
	}
	for k, v := range vals {
		if !contains(known, k) {
			return nil, fmt.Errorf("loader: %s:%s: unknown option %q (known: %s)", format, spec, k, strings.Join(known, ", "))
		}
		if len(v) > 1 {
			return nil, fmt.Errorf("loader: %s:%s: option %q given %d times", format, spec, k, len(v))
		}
	}
	o.vals = vals
	return o, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func (o *formatOptions) str(key, def string) string {
	if v := o.vals.Get(key); v != "" {
		return v
	}
	return def
}

func (o *formatOptions) errorf(format string, args ...any) error {
	return fmt.Errorf("loader: %s:%s: "+format, append([]any{o.format, o.path}, args...)...)
}

// size parses size=WxH (or size=N for N×N); 0, 0 when absent.
func (o *formatOptions) size() (h, w int, err error) {
	v := o.vals.Get("size")
	if v == "" {
		return 0, 0, nil
	}
	ws, hs, square := strings.Cut(strings.ToLower(v), "x")
	if !square {
		hs = ws
	}
	w, err1 := strconv.Atoi(ws)
	h, err2 := strconv.Atoi(hs)
	if err1 != nil || err2 != nil || w <= 0 || h <= 0 || w > 1<<16 || h > 1<<16 {
		return 0, 0, o.errorf("size=%s: want WIDTHxHEIGHT, e.g. 32x32", v)
	}
	return h, w, nil
}

// maxPixels parses maxpixels=N, the decompression-bomb bound.
func (o *formatOptions) maxPixels() (int64, error) {
	v := o.vals.Get("maxpixels")
	if v == "" {
		return DefaultMaxImagePixels, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, o.errorf("maxpixels=%s: want a positive pixel count", v)
	}
	return n, nil
}

// resize parses resize=bilinear: images of another size are stretched to
// the dataset's. Without it they are errors.
func (o *formatOptions) resize() (bool, error) {
	switch v := o.vals.Get("resize"); v {
	case "":
		return false, nil
	case "bilinear":
		return true, nil
	default:
		return false, o.errorf("resize=%s: the only resize is bilinear", v)
	}
}

// shardFiles expands a sharded format's PATH: a file, a directory (its
// files ending in ext, sorted), or a glob pattern (matches sorted).
func shardFiles(p, ext string) ([]string, error) {
	if strings.ContainsAny(p, "*?[") {
		m, err := filepath.Glob(p)
		if err != nil {
			return nil, &RecordError{File: p, Record: -1, Err: err}
		}
		if len(m) == 0 {
			return nil, &RecordError{File: p, Record: -1, Err: fmt.Errorf("%w: no file matches", fs.ErrNotExist)}
		}
		sort.Strings(m)
		return m, nil
	}
	fi, err := os.Stat(p)
	if err != nil {
		return nil, &RecordError{File: p, Record: -1, Err: err}
	}
	if !fi.IsDir() {
		return []string{p}, nil
	}
	ents, err := os.ReadDir(p)
	if err != nil {
		return nil, &RecordError{File: p, Record: -1, Err: err}
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() && strings.HasSuffix(strings.ToLower(e.Name()), ext) {
			out = append(out, filepath.Join(p, e.Name()))
		}
	}
	if len(out) == 0 {
		return nil, &RecordError{File: p, Record: -1, Err: fmt.Errorf("%w: no *%s file in the directory", fs.ErrNotExist, ext)}
	}
	return out, nil
}

// decodeOptions reads the options every decoded format takes: size=,
// maxpixels= and resize=.
func (o *formatOptions) decodeOptions() (h, w int, maxPx int64, resize bool, err error) {
	if resize, err = o.resize(); err != nil {
		return 0, 0, 0, false, err
	}
	if h, w, err = o.size(); err != nil {
		return 0, 0, 0, false, err
	}
	if maxPx, err = o.maxPixels(); err != nil {
		return 0, 0, 0, false, err
	}
	return h, w, maxPx, resize, nil
}
