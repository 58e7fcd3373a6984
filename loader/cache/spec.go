package cache

import (
	"fmt"
	"strings"

	"github.com/loaderd/loaderd/internal/bytesize"
	"github.com/loaderd/loaderd/loader"
)

// SplitSpec takes the cache's options out of FORMAT:PATH?OPTIONS and
// returns the rest, for loader.Open:
//
//	cache=decoded     keep decoded samples in memory, shared by every stream
//	cache=none        no cache (the default)
//	cache_bytes=SIZE  bound the cache (2GiB, 512MiB, …); default: the whole
//	                  decoded dataset, for a dataset of fixed-size images
//
// on reports whether a cache was asked for.
func SplitSpec(spec string) (rest string, cfg Config, on bool, err error) {
	head, query, ok := strings.Cut(spec, "?")
	if !ok {
		return spec, Config{}, false, nil
	}
	var keep []string
	mode, size := "", ""
	for _, kv := range strings.Split(query, "&") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "cache":
			mode = v
		case "cache_bytes":
			size = v
		default:
			keep = append(keep, kv)
		}
	}
	var errs []string
	switch mode {
	case "decoded":
		on = true
	case "", "none":
	default:
		errs = append(errs, fmt.Sprintf("cache=%s: want decoded or none", mode))
	}
	if size != "" {
		if cfg.Bytes, err = bytesize.Parse(size); err != nil || cfg.Bytes == 0 {
			errs = append(errs, fmt.Sprintf("cache_bytes=%s: want a positive size such as 2GiB", size))
		} else if !on {
			errs = append(errs, fmt.Sprintf("cache_bytes=%s needs cache=decoded", size))
		}
	}
	if len(errs) > 0 {
		return "", Config{}, false, fmt.Errorf("cache: %q: %s: %w", spec, strings.Join(errs, "; "), ErrConfig)
	}
	rest = head
	if len(keep) > 0 {
		rest += "?" + strings.Join(keep, "&")
	}
	return rest, cfg, on, nil
}

// Open opens FORMAT:PATH?OPTIONS as loader.Open does, wrapped in a Cache
// when the options ask for one (see SplitSpec). Every stream reading the
// returned source shares the cache.
func Open(spec string) (loader.Source, error) {
	rest, cfg, on, err := SplitSpec(spec)
	if err != nil {
		return nil, err
	}
	src, err := loader.Open(rest)
	if err != nil || !on {
		return src, err
	}
	c, err := New(src, cfg)
	if err != nil {
		src.Close()
		return nil, err
	}
	return c, nil
}
