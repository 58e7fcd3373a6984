package top

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// maxScrape bounds what one scrape reads: a daemon's page is a few hundred
// KiB at most; anything far larger is not a loaderd endpoint.
const maxScrape = 16 << 20

// Series is one time series of a scrape: its labels and value. For a
// histogram Value is the sum of observations and Count their number.
type Series struct {
	Labels map[string]string
	Value  float64
	Count  float64
}

// Sample is one scrape of the endpoint: series by metric name.
type Sample struct {
	At     time.Time
	series map[string][]Series
}

// Get returns the series of the named metric (nil when absent).
func (s Sample) Get(name string) []Series { return s.series[name] }

// Has reports whether the scrape had the named metric.
func (s Sample) Has(name string) bool { _, ok := s.series[name]; return ok }

// Scrape reads url (a daemon's /metrics) once.
func Scrape(ctx context.Context, client *http.Client, url string) (Sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Sample{}, fmt.Errorf("top: %w", err)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := client.Do(req)
	if err != nil {
		return Sample{}, fmt.Errorf("top: scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Sample{}, fmt.Errorf("top: scrape %s: %s", url, resp.Status)
	}
	s, err := Parse(io.LimitReader(resp.Body, maxScrape))
	if err != nil {
		return Sample{}, fmt.Errorf("top: scrape %s: %w", url, err)
	}
	s.At = time.Now()
	return s, nil
}

// Parse reads the Prometheus text exposition format.
func Parse(r io.Reader) (Sample, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return Sample{}, fmt.Errorf("top: %w", err)
	}
	s := Sample{series: make(map[string][]Series, len(fams))}
	for name, f := range fams {
		out := make([]Series, 0, len(f.GetMetric()))
		for _, m := range f.GetMetric() {
			out = append(out, series(f.GetType(), m))
		}
		s.series[name] = out
	}
	return s, nil
}

func series(t dto.MetricType, m *dto.Metric) Series {
	sr := Series{Labels: make(map[string]string, len(m.GetLabel()))}
	for _, l := range m.GetLabel() {
		sr.Labels[l.GetName()] = l.GetValue()
	}
	switch t {
	case dto.MetricType_COUNTER:
		sr.Value = m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		sr.Value = m.GetGauge().GetValue()
	case dto.MetricType_HISTOGRAM:
		sr.Value, sr.Count = m.GetHistogram().GetSampleSum(), float64(m.GetHistogram().GetSampleCount())
	case dto.MetricType_SUMMARY:
		sr.Value, sr.Count = m.GetSummary().GetSampleSum(), float64(m.GetSummary().GetSampleCount())
	default:
		sr.Value = m.GetUntyped().GetValue()
	}
	return sr
}

// key identifies a series by the values of some labels.
func key(sr Series, labels ...string) string {
	var b strings.Builder
	for i, l := range labels {
		if i > 0 {
			b.WriteByte(0)
		}
		b.WriteString(sr.Labels[l])
	}
	return b.String()
}
