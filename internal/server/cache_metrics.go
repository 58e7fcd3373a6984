package server

import (
	"fmt"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/loaderd/loaderd/loader/cache"
)

// memCache is the budget's kind for decoded-sample caches (?cache=decoded):
// reserved whole when the server starts, for the dataset's life.
const memCache = "cache"

// datasetCache returns the dataset's decoded-sample cache, if it has one.
func datasetCache(d *Dataset) (*cache.Cache, bool) {
	c, ok := d.Source.(*cache.Cache)
	return c, ok
}

// reserveCaches counts every dataset's cache (its arena and entry table)
// in the budget before any stream opens: a cache the limit cannot hold
// stops the daemon at start, naming the dataset, instead of starving
// streams later.
func reserveCaches(mem *budget, datasets []*Dataset) error {
	for _, d := range datasets {
		if c, ok := datasetCache(d); ok {
			if err := mem.reserve(memCache, c.Reserved()); err != nil {
				return fmt.Errorf("server: dataset %s: decoded cache: %w (raise --memory-limit or lower cache_bytes=)", d.Name, err)
			}
		}
	}
	return nil
}

// cacheCollector exports each cached dataset's counters, read from the
// cache at every scrape: nothing is counted twice, and the workers' hot
// path touches no Prometheus state.
type cacheCollector struct {
	names  []string
	caches []*cache.Cache

	hits, misses, evictions, entries, bytes, capacity, reserved *prometheus.Desc
}

// registerCacheMetrics registers the collector, and the budget's cache
// memory, for the datasets that have a cache.
func registerCacheMetrics(reg *prometheus.Registry, s *Server) {
	c := &cacheCollector{}
	for name, d := range s.datasets {
		if _, ok := datasetCache(d); ok {
			c.names = append(c.names, name)
		}
	}
	if len(c.names) == 0 {
		return
	}
	slices.Sort(c.names)
	for _, name := range c.names {
		dc, _ := datasetCache(s.datasets[name])
		c.caches = append(c.caches, dc)
	}
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, []string{"dataset"}, nil)
	}
	c.hits = desc("loaderd_cache_hits_total", "Samples served from the dataset's decoded cache.")
	c.misses = desc("loaderd_cache_misses_total", "Samples the dataset's source read and decoded (not in the cache).")
	c.evictions = desc("loaderd_cache_evictions_total", "Entries evicted from the decoded cache; static admission never evicts.")
	c.entries = desc("loaderd_cache_entries", "Samples held in the decoded cache.")
	c.bytes = desc("loaderd_cache_bytes", "Pixel bytes held in the decoded cache.")
	c.capacity = desc("loaderd_cache_capacity_bytes", "Pixel bytes the decoded cache can hold (cache_bytes=).")
	c.reserved = desc("loaderd_cache_reserved_bytes", "Memory the decoded cache holds in the daemon's budget: pixels and entry table.")
	reg.MustRegister(c)
}

func (c *cacheCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.hits, c.misses, c.evictions, c.entries, c.bytes, c.capacity, c.reserved} {
		ch <- d
	}
}

func (c *cacheCollector) Collect(ch chan<- prometheus.Metric) {
	for k, dc := range c.caches {
		s, name := dc.Stats(), c.names[k]
		for _, m := range []struct {
			d *prometheus.Desc
			t prometheus.ValueType
			v int64
		}{
			{c.hits, prometheus.CounterValue, s.Hits},
			{c.misses, prometheus.CounterValue, s.Misses},
			{c.evictions, prometheus.CounterValue, s.Evictions},
			{c.entries, prometheus.GaugeValue, s.Entries},
			{c.bytes, prometheus.GaugeValue, s.Bytes},
			{c.capacity, prometheus.GaugeValue, s.Capacity},
			{c.reserved, prometheus.GaugeValue, dc.Reserved()},
		} {
			ch <- prometheus.MustNewConstMetric(m.d, m.t, float64(m.v), name)
		}
	}
}
