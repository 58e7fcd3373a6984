package top

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/loaderd/loaderd/internal/bytesize"
)

var nan = math.NaN()

// Render writes f as a plain-text table.
func Render(w io.Writer, f Frame) error {
	var b strings.Builder
	auto := "fixed"
	if f.Auto {
		auto = "auto"
	}
	fmt.Fprintf(&b, "loaderd top — every %v\n", f.Interval.Round(10*time.Millisecond))
	fmt.Fprintf(&b, "workers  %s active of %s (%s), %s busy    memory  %s of %s\n\n",
		num(f.Active, 0), num(f.Workers, 0), auto, num(f.Busy, 2), size(f.MemUsed), size(f.MemLimit))

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STREAM\tDATASET\tCLIENT\tRANK\tTRANSPORT\tIMAGES/S\tWAIT\tWINDOW\t")
	if len(f.Streams) == 0 {
		fmt.Fprintln(tw, "(none)\t\t\t\t\t\t\t\t")
	}
	for _, s := range f.Streams {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s/%s\t\n", s.ID, s.Dataset, clip(s.Client, 24), s.Rank, s.Transport,
			num(s.ImagesPerSec, 0), pct(s.WaitShare), num(s.InWindow, 0), num(s.Window, 0))
	}
	fmt.Fprintln(tw, "\t\t\t\t\t\t\t\t")
	fmt.Fprintln(tw, "DATASET\tIMAGES/S\tMEAN WAIT\tERRORS\tCACHE HITS\tCACHED\tENTRIES\tEVICTED\t")
	for _, d := range f.Datasets {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", d.Name, num(d.ImagesPerSec, 0), dur(d.MeanWait),
			num(d.Errors, 0), pct(d.HitRate), size(d.CacheBytes), num(d.CacheEntries, 0), num(d.Evictions, 0))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Options configure Run.
type Options struct {
	URL      string        // the daemon's /metrics
	Interval time.Duration // between refreshes
	Once     bool          // print one frame (two scrapes Interval apart) and return
	Client   *http.Client
}

// Run scrapes o.URL every o.Interval and redraws w until ctx ends. With
// o.Once it prints a single frame, without terminal control codes.
func Run(ctx context.Context, w io.Writer, o Options) error {
	if o.Client == nil {
		o.Client = &http.Client{Timeout: max(o.Interval, time.Second)}
	}
	prev, err := Scrape(ctx, o.Client, o.URL)
	if err != nil {
		return err
	}
	t := time.NewTicker(o.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		cur, err := Scrape(ctx, o.Client, o.URL)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if !o.Once {
			io.WriteString(w, "\x1b[H\x1b[2J") // home, clear: redraw in place
		}
		if err := Render(w, NewFrame(prev, cur)); err != nil {
			return err
		}
		if o.Once {
			return nil
		}
		prev = cur
	}
}

func num(v float64, prec int) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.*f", prec, v)
}

func pct(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*v)
}

func dur(sec float64) string {
	if math.IsNaN(sec) {
		return "-"
	}
	return time.Duration(sec * float64(time.Second)).Round(time.Microsecond).String()
}

func size(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return bytesize.Format(int64(v))
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
