package server

import (
	"github.com/loaderd/loaderd/loader/format/tar"

	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// waitBuckets span 10 µs to 2.6 s: a batch already in the ring to a
// stalled trainer.
var waitBuckets = prometheus.ExponentialBuckets(1e-5, 4, 10)

type metrics struct {
	images            *prometheus.CounterVec
	batches           *prometheus.CounterVec
	sampleErrors      *prometheus.CounterVec
	inFlight          prometheus.Gauge
	slotsLeased       prometheus.Gauge
	streams           prometheus.Gauge
	opensRefused      prometheus.Counter
	floodsClosed      prometheus.Counter
	floodConnsRefused prometheus.Counter
	wait              *prometheus.HistogramVec
	clientWait        *prometheus.HistogramVec
	busy              *prometheus.HistogramVec
	tuned             *prometheus.CounterVec

	// Per stream, labelled by a small number reused across streams (see
	// streamTable), so the series stay bounded however many streams come
	// and go; loaderd_stream_info says which stream a number is now.
	sImages     *prometheus.CounterVec
	sWait       *prometheus.CounterVec
	sWindowFull *prometheus.CounterVec
	sWindow     *prometheus.GaugeVec
	sWindowSize *prometheus.GaugeVec
	sInfo       *prometheus.GaugeVec
}

func newMetrics(reg *prometheus.Registry, s *Server) *metrics {
	stream := []string{"stream"}
	m := &metrics{
		images: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "loaderd_images_total",
			Help: "Images sent to clients; rate() gives images/s."}, []string{"dataset"}),
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "loaderd_batches_total",
			Help: "Batches sent to clients."}, []string{"dataset"}),
		sampleErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "loaderd_sample_errors_total",
			Help: "Samples that failed to read, decode or augment."}, []string{"dataset"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "loaderd_batches_in_flight",
			Help: "Batches sent and not yet acknowledged, over all streams."}),
		slotsLeased: prometheus.NewGauge(prometheus.GaugeOpts{Name: "loaderd_slots_leased",
			Help: "Pinned batch slots held by open streams."}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{Name: "loaderd_streams",
			Help: "Streams being served."}),
		opensRefused: prometheus.NewCounter(prometheus.CounterOpts{Name: "loaderd_opens_refused_total",
			Help: "Streams refused as they started because their connection had reset streams before their header faster than the per-connection rate (an HTTP/2 rapid-reset flood)."}),
		floodsClosed: prometheus.NewCounter(prometheus.CounterOpts{Name: "loaderd_flood_connections_closed_total",
			Help: "Connections the daemon closed because they kept resetting streams before their header far past the per-connection rate."}),
		floodConnsRefused: prometheus.NewCounter(prometheus.CounterOpts{Name: "loaderd_flood_peer_connections_refused_total",
			Help: "New connections closed unread because their peer (IP address, or user on a Unix socket) flooded recently."}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "loaderd_stream_wait_seconds",
			Help:    "Time a stream waited for the workers to finish its next batch.",
			Buckets: waitBuckets}, []string{"dataset"}),
		clientWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "loaderd_client_wait_seconds",
			Help:    "Time a client's caller waited for a batch, from asking to having it, as the client reports on the ack (0 when it was already there). rate(_sum)/rate(_count) is the mean stall per batch.",
			Buckets: waitBuckets}, []string{"dataset"}),
		busy: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "loaderd_worker_busy_seconds",
			Help:    "Worker time spent filling one batch, summed over its chunks; rate(_sum) is the workers kept busy by the dataset.",
			Buckets: prometheus.ExponentialBuckets(1e-4, 4, 10)}, []string{"dataset"}),
		tuned: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "loaderd_workers_changes_total",
			Help: "Changes of the active worker count by --workers auto, by direction (grow, shrink)."}, []string{"direction"}),

		sImages: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "loaderd_stream_images_total",
			Help: "Images sent on the stream numbered by the label (numbers are reused; see loaderd_stream_info)."}, stream),
		sWait: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "loaderd_stream_client_wait_seconds_total",
			Help: "Seconds the stream's caller waited for batches, as its client reports; rate() is the share of its time it stalls."}, stream),
		sWindowFull: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "loaderd_stream_window_full_seconds_total",
			Help: "Seconds the daemon held a stream's next batch back because the client's window was full (the client, not the workers, was the bottleneck)."}, stream),
		sWindow: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "loaderd_stream_window_batches",
			Help: "Batches sent on the stream and not yet acknowledged."}, stream),
		sWindowSize: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "loaderd_stream_window_size",
			Help: "The stream's window: the most batches sent and not yet acknowledged."}, stream),
		sInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "loaderd_stream_info",
			Help: "1 for each open stream: what its stream number stands for now."},
			[]string{"stream", "dataset", "client", "rank", "world", "transport"}),
	}
	for _, kind := range []string{memStream, memIdle, memScratch, memDecode, memNames, memGet} {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "loaderd_memory_bytes",
			Help:        "Memory counted in --memory-limit, by kind: stream (open streams' pinned pools), idle (pools kept warm), scratch (workers' buffers), decode (decodes of images of 1 Mpx or more in progress), names (SampleNames pages being built), get (GetSamples responses being built and their decode scratch).",
			ConstLabels: prometheus.Labels{"kind": kind}}, func() float64 { return float64(s.mem.inUse(kind)) }))
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "loaderd_memory_limit_bytes",
		Help: "The daemon's memory limit (--memory-limit)."}, func() float64 { return float64(s.mem.limit) }))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "loaderd_tar_sidecars_dropped_total",
		Help: "Sidecar indexes (.tar.idx) dropped because they disagreed with their shard's tar headers (each also logged, naming the shard and member)."},
		func() float64 { return float64(tar.SidecarsDropped()) }))
	// The pool is read at scrape time; New builds it after the metrics.
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "loaderd_workers_active",
			Help: "Workers taking chunks now (--workers N: N; --workers auto: the tuner's choice)."},
			func() float64 { return float64(s.pool.Active()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "loaderd_workers",
			Help: "Worker goroutines, active or parked: --workers N, or the most --workers auto may use."},
			func() float64 { return float64(s.pool.Workers()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "loaderd_workers_auto",
			Help: "1 when --workers auto sets the active workers, else 0."},
			func() float64 { return boolFloat(s.opts.AutoWorkers) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "loaderd_workers_busy_seconds_total",
			Help: "Time workers spent filling chunks, all datasets, chunks in progress included; rate() is the number of busy workers."},
			func() float64 { return s.pool.Busy().Seconds() }),
	)
	reg.MustRegister(m.images, m.batches, m.sampleErrors, m.inFlight, m.slotsLeased, m.streams, m.opensRefused, m.floodsClosed, m.floodConnsRefused, m.wait,
		m.clientWait, m.busy, m.tuned, m.sImages, m.sWait, m.sWindowFull, m.sWindow, m.sWindowSize, m.sInfo,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// streamMetrics are one stream's dataset's children, looked up once.
type streamMetrics struct {
	images, batches, sampleErrors prometheus.Counter
	wait, clientWait, busy        prometheus.Observer
}

func (m *metrics) forDataset(name string) streamMetrics {
	return streamMetrics{
		images:       m.images.WithLabelValues(name),
		batches:      m.batches.WithLabelValues(name),
		sampleErrors: m.sampleErrors.WithLabelValues(name),
		wait:         m.wait.WithLabelValues(name),
		clientWait:   m.clientWait.WithLabelValues(name),
		busy:         m.busy.WithLabelValues(name),
	}
}

// maxStreamLabels bounds the per-stream series: streams beyond it share
// the label "other" (and have no loaderd_stream_info).
const maxStreamLabels = 64

// streamStat is one open stream's counters: its Prometheus children and
// the client wait the autotuner reads.
type streamStat struct {
	label  string
	info   []string // loaderd_stream_info's label values; nil for "other"
	opened time.Time
	waitNs atomic.Int64 // client-reported wait, summed
	sent   atomic.Int64 // images sent

	images, wait, windowFull prometheus.Counter
	window                   prometheus.Gauge
}

// streamTable numbers open streams with the smallest free number, so a
// live view can follow each stream's rates while the label set stays
// bounded. Safe for concurrent use.
type streamTable struct {
	m    *metrics
	mu   sync.Mutex
	nums []*streamStat // by label number; nil is free
	all  map[*streamStat]struct{}
}

func newStreamTable(m *metrics) *streamTable {
	return &streamTable{m: m, all: map[*streamStat]struct{}{}}
}

// open registers a stream and returns its counters.
func (t *streamTable) open(dataset, client string, rank, world, window int, transport string) *streamStat {
	st := &streamStat{label: "other", opened: time.Now()}
	t.mu.Lock()
	for i := range maxStreamLabels {
		if i == len(t.nums) {
			t.nums = append(t.nums, nil)
		}
		if t.nums[i] == nil {
			t.nums[i], st.label = st, strconv.Itoa(i)
			st.info = []string{st.label, dataset, client, strconv.Itoa(rank), strconv.Itoa(world), transport}
			break
		}
	}
	t.all[st] = struct{}{}
	t.mu.Unlock()
	m := t.m
	st.images, st.wait = m.sImages.WithLabelValues(st.label), m.sWait.WithLabelValues(st.label)
	st.windowFull, st.window = m.sWindowFull.WithLabelValues(st.label), m.sWindow.WithLabelValues(st.label)
	if st.info != nil {
		st.window.Set(0)
		m.sWindowSize.WithLabelValues(st.label).Set(float64(window))
		m.sInfo.WithLabelValues(st.info...).Set(1)
	}
	return st
}

// close frees the stream's number. Its counters stay: the next stream
// with the number continues them, as rate() expects of a counter.
func (t *streamTable) close(st *streamStat) {
	t.mu.Lock()
	delete(t.all, st)
	if st.info != nil {
		n, _ := strconv.Atoi(st.label)
		t.nums[n] = nil
	}
	t.mu.Unlock()
	if st.info != nil {
		st.window.Set(0)
		t.m.sWindowSize.WithLabelValues(st.label).Set(0)
		t.m.sInfo.DeleteLabelValues(st.info...)
	}
}

// each calls f for every open stream, under the table's lock.
func (t *streamTable) each(f func(*streamStat)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for st := range t.all {
		f(st)
	}
}

// clientWait records a wait the client reported on an ack, bounded by the
// stream's age: a client cannot have waited longer than the stream has
// been open, and a corrupt value must not swamp the histogram's sum.
func (st *streamStat) clientWait(m streamMetrics, ns uint64, now time.Time) {
	d := min(ns, uint64(now.Sub(st.opened)))
	st.waitNs.Add(int64(d))
	sec := time.Duration(d).Seconds()
	m.clientWait.Observe(sec)
	st.wait.Add(sec)
}
