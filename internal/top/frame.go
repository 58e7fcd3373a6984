package top

import (
	"sort"
	"strconv"
	"time"
)

// The metrics a frame reads; internal/server exports them (see
// docs/OPERATIONS.md). A daemon without one of them (an older one, or the
// cache off) shows "-" in its place.
const (
	mImages        = "loaderd_images_total"        // {dataset}
	mSampleErrors  = "loaderd_sample_errors_total" // {dataset}
	mClientWait    = "loaderd_client_wait_seconds" // histogram {dataset}
	mStreamInfo    = "loaderd_stream_info"         // {stream, dataset, client, rank, world, transport}
	mStreamImages  = "loaderd_stream_images_total" // {stream}
	mStreamWait    = "loaderd_stream_client_wait_seconds_total"
	mStreamInWin   = "loaderd_stream_window_batches" // {stream}
	mStreamWinSize = "loaderd_stream_window_size"    // {stream}
	mWorkers       = "loaderd_workers"
	mWorkersActive = "loaderd_workers_active"
	mWorkersAuto   = "loaderd_workers_auto"
	mWorkersBusy   = "loaderd_workers_busy_seconds_total"
	mMemory        = "loaderd_memory_bytes" // {kind}
	mMemoryLimit   = "loaderd_memory_limit_bytes"
	mCacheHits     = "loaderd_cache_hits_total"      // {dataset}
	mCacheMisses   = "loaderd_cache_misses_total"    // {dataset}
	mCacheBytes    = "loaderd_cache_bytes"           // {dataset}
	mCacheEntries  = "loaderd_cache_entries"         // {dataset}
	mCacheEvicted  = "loaderd_cache_evictions_total" // {dataset}
)

// Frame is what one refresh shows: rates over the interval between two
// scrapes. NaN marks a figure the daemon does not export.
type Frame struct {
	Interval time.Duration

	Workers, Active float64 // started, and active now
	Auto            bool    // --workers auto steers Active
	Busy            float64 // workers kept busy on average (busy seconds per second)

	MemUsed, MemLimit float64

	Streams  []StreamRow
	Datasets []DatasetRow
}

// StreamRow is one open stream.
type StreamRow struct {
	ID, Dataset, Client, Rank, Transport string
	ImagesPerSec                         float64
	WaitShare                            float64 // share of the interval its caller waited for batches
	InWindow, Window                     float64 // batches unacknowledged, and the most allowed
}

// DatasetRow is one dataset.
type DatasetRow struct {
	Name         string
	ImagesPerSec float64
	MeanWait     float64 // mean client wait per batch over the interval, seconds
	Errors       float64 // sample errors over the interval
	HitRate      float64 // decoded-cache hits / lookups over the interval
	CacheBytes   float64
	CacheEntries float64
	Evictions    float64 // over the interval
}

// NewFrame computes a frame from two scrapes, prev before cur.
func NewFrame(prev, cur Sample) Frame {
	dt := cur.At.Sub(prev.At).Seconds()
	if dt <= 0 {
		dt = 1
	}
	f := Frame{Interval: cur.At.Sub(prev.At),
		Workers: one(cur, mWorkers), Active: one(cur, mWorkersActive),
		Auto: one(cur, mWorkersAuto) == 1, MemLimit: one(cur, mMemoryLimit),
		Busy: delta(prev, cur, mWorkersBusy, "")[""] / dt}
	f.MemUsed = nan
	if cur.Has(mMemory) {
		f.MemUsed = 0
		for _, s := range cur.Get(mMemory) {
			f.MemUsed += s.Value
		}
	}
	imgs := delta(prev, cur, mStreamImages, "stream")
	waits := delta(prev, cur, mStreamWait, "stream")
	inWin, winSize := last(cur, mStreamInWin, "stream"), last(cur, mStreamWinSize, "stream")
	for _, s := range cur.Get(mStreamInfo) {
		if s.Value != 1 {
			continue
		}
		id := s.Labels["stream"]
		f.Streams = append(f.Streams, StreamRow{ID: id, Dataset: s.Labels["dataset"], Client: s.Labels["client"],
			Rank: s.Labels["rank"] + "/" + s.Labels["world"], Transport: s.Labels["transport"],
			ImagesPerSec: imgs[id] / dt, WaitShare: orNaN(waits, id) / dt,
			InWindow: orNaN(inWin, id), Window: orNaN(winSize, id)})
	}
	sort.Slice(f.Streams, func(i, j int) bool { return less(f.Streams[i].ID, f.Streams[j].ID) })

	dImgs, dErrs := delta(prev, cur, mImages, "dataset"), delta(prev, cur, mSampleErrors, "dataset")
	hits, misses := delta(prev, cur, mCacheHits, "dataset"), delta(prev, cur, mCacheMisses, "dataset")
	evicted := delta(prev, cur, mCacheEvicted, "dataset")
	bytes, entries := last(cur, mCacheBytes, "dataset"), last(cur, mCacheEntries, "dataset")
	waitSum, waitN := deltaHist(prev, cur, mClientWait, "dataset")
	names := map[string]bool{}
	for _, m := range []map[string]float64{dImgs, hits, bytes} {
		for name := range m {
			names[name] = true
		}
	}
	for name := range names {
		r := DatasetRow{Name: name, ImagesPerSec: dImgs[name] / dt, Errors: dErrs[name],
			MeanWait: nan, HitRate: nan, CacheBytes: orNaN(bytes, name), CacheEntries: orNaN(entries, name),
			Evictions: orNaN(evicted, name)}
		if n := waitN[name]; n > 0 {
			r.MeanWait = waitSum[name] / n
		}
		if h, ok := hits[name]; ok {
			if all := h + misses[name]; all > 0 {
				r.HitRate = h / all
			}
		}
		f.Datasets = append(f.Datasets, r)
	}
	sort.Slice(f.Datasets, func(i, j int) bool { return f.Datasets[i].Name < f.Datasets[j].Name })
	return f
}

// less orders stream numbers numerically.
func less(a, b string) bool {
	x, errA := strconv.Atoi(a)
	y, errB := strconv.Atoi(b)
	if errA != nil || errB != nil {
		return a < b
	}
	return x < y
}

// delta returns cur - prev of a counter per label value. A series that is
// new in cur counts from 0; one that went down (the daemon restarted, or a
// reused stream number) counts from 0 too, as Prometheus's rate() does.
func delta(prev, cur Sample, name, label string) map[string]float64 {
	if !cur.Has(name) {
		return map[string]float64{}
	}
	before := last(prev, name, label)
	out := map[string]float64{}
	for _, s := range cur.Get(name) {
		k := key(s, label)
		d := s.Value - before[k]
		if d < 0 {
			d = s.Value
		}
		out[k] += d
	}
	return out
}

// deltaHist is delta for a histogram's sum and count.
func deltaHist(prev, cur Sample, name, label string) (sum, count map[string]float64) {
	sum, count = map[string]float64{}, map[string]float64{}
	old := map[string]Series{}
	for _, s := range prev.Get(name) {
		old[key(s, label)] = s
	}
	for _, s := range cur.Get(name) {
		k := key(s, label)
		o := old[k]
		if s.Count < o.Count {
			o = Series{}
		}
		sum[k] += s.Value - o.Value
		count[k] += s.Count - o.Count
	}
	return sum, count
}

// last returns the current value per label value.
func last(s Sample, name, label string) map[string]float64 {
	out := map[string]float64{}
	for _, sr := range s.Get(name) {
		out[key(sr, label)] += sr.Value
	}
	return out
}

// one returns an unlabelled metric's value, NaN when absent.
func one(s Sample, name string) float64 {
	v, ok := last(s, name, "")[""]
	if !ok {
		return nan
	}
	return v
}

func orNaN(m map[string]float64, k string) float64 {
	if v, ok := m[k]; ok {
		return v
	}
	return nan
}
