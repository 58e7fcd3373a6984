package server

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

type metrics struct {
	images       *prometheus.CounterVec
	batches      *prometheus.CounterVec
	sampleErrors *prometheus.CounterVec
	inFlight     prometheus.Gauge
	slotsLeased  prometheus.Gauge
	streams      prometheus.Gauge
	wait         *prometheus.HistogramVec
}

func newMetrics(reg *prometheus.Registry, s *Server) *metrics {
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
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "loaderd_stream_wait_seconds",
			Help:    "Time a stream waited for the workers to finish its next batch.",
			Buckets: prometheus.ExponentialBuckets(1e-5, 4, 10)}, []string{"dataset"}),
	}
	for _, kind := range []string{memStream, memIdle, memScratch} {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "loaderd_memory_bytes",
			Help:        "Batch memory in use, by kind: stream (open streams' pinned pools), idle (pools kept warm), scratch (workers' buffers).",
			ConstLabels: prometheus.Labels{"kind": kind}}, func() float64 { return float64(s.mem.inUse(kind)) }))
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "loaderd_memory_limit_bytes",
		Help: "The daemon's memory limit (--memory-limit)."}, func() float64 { return float64(s.mem.limit) }))
	reg.MustRegister(m.images, m.batches, m.sampleErrors, m.inFlight, m.slotsLeased, m.streams, m.wait,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// streamMetrics are one stream's children, looked up once.
type streamMetrics struct {
	images, batches, sampleErrors prometheus.Counter
	wait                          prometheus.Observer
}

func (m *metrics) forDataset(name string) streamMetrics {
	return streamMetrics{
		images:       m.images.WithLabelValues(name),
		batches:      m.batches.WithLabelValues(name),
		sampleErrors: m.sampleErrors.WithLabelValues(name),
		wait:         m.wait.WithLabelValues(name),
	}
}
