package options

import (
	"time"

	"context"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/imagedec"
	"github.com/loaderd/loaderd/loader/objstore"
)

// Options are the options after '?' in FORMAT:PATH?KEY=VALUE&…, e.g.
// "tar:shards/*.tar?size=32x32". Each format names the keys it knows; any
// other key is an error, so a typo is never ignored.
type Options struct {
	Format string // FORMAT, which starts every error message
	Path   string // PATH, without the options
	vals   url.Values
}

// Parse splits spec, "PATH[?OPTIONS]", and checks the option keys against
// known. An empty PATH is an error.
func Parse(format, spec string, known ...string) (*Options, error) {
	p, query, _ := strings.Cut(spec, "?")
	if p == "" {
		return nil, fmt.Errorf("%s: no path given (%s:PATH[?OPTIONS])", format, format)
	}
	if objstore.IsURL(p) {
		// endpoint=, region=: where the shards' objects are.
		known = append(slices.Clip(known), objstore.OptionKeys...)
	}
	vals, err := url.ParseQuery(query)
	if err != nil {
		return nil, fmt.Errorf("%s:%s: options: %w", format, spec, err)
	}
	for k, v := range vals {
		if !slices.Contains(known, k) {
			return nil, fmt.Errorf("%s:%s: unknown option %q (known: %s)", format, spec, k, strings.Join(known, ", "))
		}
		if len(v) > 1 {
			return nil, fmt.Errorf("%s:%s: option %q given %d times", format, spec, k, len(v))
		}
	}
	return &Options{Format: format, Path: p, vals: vals}, nil
}

// Get returns the option's value, "" when absent.
func (o *Options) Get(key string) string { return o.vals.Get(key) }

// Str returns the option's value, def when absent or empty.
func (o *Options) Str(key, def string) string {
	if v := o.vals.Get(key); v != "" {
		return v
	}
	return def
}

// Errorf returns an error about an option, prefixed with FORMAT:PATH.
func (o *Options) Errorf(format string, args ...any) error {
	return fmt.Errorf("%s:%s: "+format, append([]any{o.Format, o.Path}, args...)...)
}

// Size parses size=WxH (or size=N for N×N); 0, 0 when absent.
func (o *Options) Size() (h, w int, err error) {
	v := o.vals.Get("size")
	if v == "" || o.AnySize() {
		return 0, 0, nil
	}
	ws, hs, square := strings.Cut(strings.ToLower(v), "x")
	if !square {
		hs = ws
	}
	w, err1 := strconv.Atoi(ws)
	h, err2 := strconv.Atoi(hs)
	if err1 != nil || err2 != nil || w <= 0 || h <= 0 || w > 1<<16 || h > 1<<16 {
		return 0, 0, o.Errorf("size=%s: want WIDTHxHEIGHT, e.g. 32x32", v)
	}
	return h, w, nil
}

// AnySize reports size=any: images of varying size, each kept at its own
// (loader.SizedSource), for a pipeline that opens with resize or crop ops.
func (o *Options) AnySize() bool { return strings.EqualFold(o.vals.Get("size"), "any") }

// maxPixels parses maxpixels=N, the decompression-bomb bound.
func (o *Options) maxPixels() (int64, error) {
	v := o.vals.Get("maxpixels")
	if v == "" {
		return imagedec.DefaultMaxPixels, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, o.Errorf("maxpixels=%s: want a positive pixel count", v)
	}
	return n, nil
}

// MaxBytes parses maxbytes=N, the most bytes one encoded image may have
// (imagedec.DefaultMaxBytes when absent): imagedec.Source checks it before
// reading or decoding an image, and refuses a larger one with
// imagedec.ErrTooLarge (imagedec.TooLarge).
func (o *Options) MaxBytes() (int64, error) {
	v := o.vals.Get("maxbytes")
	if v == "" {
		return imagedec.DefaultMaxBytes, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, o.Errorf("maxbytes=%s: want a positive number of bytes", v)
	}
	return n, nil
}

// resize parses resize=bilinear: images of another size are stretched to
// the dataset's. Without it they are errors.
func (o *Options) resize() (bool, error) {
	switch v := o.vals.Get("resize"); v {
	case "":
		return false, nil
	case "bilinear":
		return true, nil
	default:
		return false, o.Errorf("resize=%s: the only resize is bilinear", v)
	}
}

// Decode reads the options every format of encoded images takes: size=,
// maxpixels= and resize=, what imagedec.NewPool needs. h and w are 0 when
// size= is absent (imagedec.NewSource probes the first images) and with
// size=any, which refuses resize= and raises maxpixels='s default to
// imagedec.AnySizeMaxPixels.
func (o *Options) Decode() (h, w int, maxPx int64, resize bool, err error) {
	if resize, err = o.resize(); err != nil {
		return 0, 0, 0, false, err
	}
	if h, w, err = o.Size(); err != nil {
		return 0, 0, 0, false, err
	}
	if maxPx, err = o.maxPixels(); err != nil {
		return 0, 0, 0, false, err
	}
	if o.AnySize() {
		if resize {
			return 0, 0, 0, false, o.Errorf("size=any keeps each image's size; resize=bilinear needs a size")
		}
		if o.vals.Get("maxpixels") == "" {
			maxPx = imagedec.AnySizeMaxPixels // a worker's scratch holds one
		}
	}
	return h, w, maxPx, resize, nil
}

// Backend parses decoder=turbo|go, the JPEG decoder (imagedec.ChooseBackend):
// turbo is libjpeg-turbo, PIL's decoder; the default is turbo where
// libturbojpeg.so.0 loads, Go's decoder elsewhere.
func (o *Options) Backend() (imagedec.Backend, error) {
	b, err := imagedec.ChooseBackend(o.vals.Get("decoder"))
	if err != nil {
		return b, o.Errorf("%v", err)
	}
	return b, nil
}

// Images reads every option of a format of encoded images (Decode,
// Backend, MaxBytes and Exact, in that order) into what imagedec.NewSource
// takes, the source named FORMAT:PATH.
func (o *Options) Images() (imagedec.Options, error) {
	h, w, maxPx, resize, err := o.Decode()
	if err != nil {
		return imagedec.Options{}, err
	}
	backend, err := o.Backend()
	if err != nil {
		return imagedec.Options{}, err
	}
	maxBytes, err := o.MaxBytes()
	if err != nil {
		return imagedec.Options{}, err
	}
	exact, err := o.Exact()
	if err != nil {
		return imagedec.Options{}, err
	}
	if o.vals.Get("maxpixels") == "" {
		// The default depends on whether the images vary in size, which
		// without size= only NewSource's probe knows.
		maxPx = 0
	}
	return imagedec.Options{Format: o.Format, Path: o.Path, H: h, W: w, AnySize: o.AnySize(),
		MaxPixels: maxPx, MaxBytes: maxBytes, Resize: resize, Backend: backend, Exact: exact}, nil
}

// Exact parses exact=torchvision (imagedec.Options.Exact): no decode
// shortcut that changes pixels relative to torchvision's PIL decode.
func (o *Options) Exact() (bool, error) {
	switch v := o.vals.Get("exact"); v {
	case "":
		return false, nil
	case "torchvision":
		return true, nil
	default:
		return false, o.Errorf("exact=%s: the only exact= is torchvision", v)
	}
}

// ShardFiles expands the PATH of a sharded format (tar, Arrow, Parquet)
// into local files: ShardFiles(o.Path, ext) for a local path, and for
// s3://BUCKET/KEY, s3://BUCKET/PREFIX/, globs and {A..B} ranges over keys
// the objects, fetched whole into the shard cache (loader/objstore), so
// that the format maps them like any file. endpoint= and region= apply.
func (o *Options) ShardFiles(ext string) ([]string, error) {
	if !objstore.IsURL(o.Path) {
		return ShardFiles(o.Path, ext)
	}
	so, err := o.Store()
	if err != nil {
		return nil, err
	}
	return objstore.Shards(context.Background(), o.Path, ext, so)
}

// Store returns the object-store options of an s3:// dataset: endpoint=,
// region= and retry_timeout= (a Go duration, how long one object may
// keep failing before its read fails).
func (o *Options) Store() (objstore.Options, error) {
	so := objstore.Options{Endpoint: o.Get("endpoint"), Region: o.Get("region")}
	if v := o.Get("retry_timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return so, o.Errorf("retry_timeout=%s: want a positive duration such as 20s", v)
		}
		so.RetryTimeout = d
	}
	return so, nil
}

// ShardFiles expands a sharded format's PATH: a file, a directory (its
// files ending in ext, sorted), or a glob pattern (matches sorted).
func ShardFiles(p, ext string) ([]string, error) {
	if strings.ContainsAny(p, "*?[") {
		m, err := filepath.Glob(p)
		if err != nil {
			return nil, &loader.RecordError{File: p, Record: -1, Err: err}
		}
		if len(m) == 0 {
			return nil, &loader.RecordError{File: p, Record: -1, Err: fmt.Errorf("%w: no file matches", fs.ErrNotExist)}
		}
		sort.Strings(m)
		return m, nil
	}
	fi, err := os.Stat(p)
	if err != nil {
		return nil, &loader.RecordError{File: p, Record: -1, Err: err}
	}
	if !fi.IsDir() {
		return []string{p}, nil
	}
	ents, err := os.ReadDir(p)
	if err != nil {
		return nil, &loader.RecordError{File: p, Record: -1, Err: err}
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() && strings.HasSuffix(strings.ToLower(e.Name()), ext) {
			out = append(out, filepath.Join(p, e.Name()))
		}
	}
	if len(out) == 0 {
		return nil, &loader.RecordError{File: p, Record: -1, Err: fmt.Errorf("%w: no *%s file in the directory", fs.ErrNotExist, ext)}
	}
	return out, nil
}
