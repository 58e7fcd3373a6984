package client

import (
	"context"
	"fmt"
	"io"
	"time"
)

// ConsumeConfig drives Consume.
type ConsumeConfig struct {
	Stream   StreamConfig
	StepTime time.Duration // simulated compute per batch, to see how much loaderd hides
	Progress io.Writer     // live progress line; nil for none
	Interval time.Duration // between progress updates; default 500 ms
}

// Consume reads a stream to its end, releasing each batch after an
// optional simulated step, and returns the stream's counters.
func Consume(ctx context.Context, c *Client, cfg ConsumeConfig) (Stats, error) {
	if cfg.Interval == 0 {
		cfg.Interval = 500 * time.Millisecond
	}
	s, err := c.Open(ctx, cfg.Stream)
	if err != nil {
		return Stats{}, err
	}
	defer s.Close()
	h := s.Header()
	last := time.Now()
	var lastImages int64
	for {
		b, err := s.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return s.Stats(), err
		}
		if cfg.StepTime > 0 {
			spin(cfg.StepTime)
		}
		epoch, index := b.Epoch, b.Index
		if err := b.Release(); err != nil {
			return s.Stats(), err
		}
		if cfg.Progress != nil && time.Since(last) >= cfg.Interval {
			st := s.Stats()
			rate := float64(st.Images-lastImages) / time.Since(last).Seconds()
			fmt.Fprintf(cfg.Progress, "\repoch %d batch %d/%d  %9.0f images/s  %6.2f GB/s  waiting %4.1f%%  ",
				epoch, index+1, h.GetBatchesPerEpoch(), rate, rate*float64(h.GetSampleBytes())/1e9, st.WaitShare()*100)
			last, lastImages = time.Now(), st.Images
		}
	}
	st := s.Stats()
	if cfg.Progress != nil {
		fmt.Fprintln(cfg.Progress)
	}
	return st, nil
}

// spin stands in for a training step without sleeping, as a real step
// keeps its thread busy.
func spin(d time.Duration) {
	for t := time.Now(); time.Since(t) < d; {
	}
}

// WaitShare is the fraction of the elapsed time callers spent waiting.
func (s Stats) WaitShare() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Wait) / float64(s.Elapsed)
}

// ImagesPerSecond is the mean delivery rate.
func (s Stats) ImagesPerSecond() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Images) / s.Elapsed.Seconds()
}
