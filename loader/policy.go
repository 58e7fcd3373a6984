package loader

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
)

// ErrorPolicy says what a stream does with a sample its source cannot
// read: a corrupt or truncated image, a wrong size, a bad label.
type ErrorPolicy uint8

const (
	// FailOnError fails the stream with the first unreadable sample, as
	// DALI and FFCV do. The default: a dataset that decodes is a dataset
	// that was checked.
	FailOnError ErrorPolicy = iota
	// SkipOnError replaces an unreadable sample with the next readable
	// one in dataset order, counts it and reports it (what PyTorch users
	// write collate functions for). Batches keep their size, and the
	// choice depends only on the dataset, so batches stay identical
	// whatever the number of workers.
	SkipOnError
)

// ParseErrorPolicy parses "fail" or "skip".
func ParseErrorPolicy(s string) (ErrorPolicy, error) {
	switch strings.ToLower(s) {
	case "fail", "":
		return FailOnError, nil
	case "skip":
		return SkipOnError, nil
	}
	return 0, fmt.Errorf("loader: unknown error policy %q (want fail or skip)", s)
}

func (p ErrorPolicy) String() string {
	switch p {
	case FailOnError:
		return "fail"
	case SkipOnError:
		return "skip"
	}
	return fmt.Sprintf("ErrorPolicy(%d)", uint8(p))
}

// ErrTooManySkips fails a SkipOnError stream that skipped more samples
// than its bound: past some point a dataset is broken, not noisy.
var ErrTooManySkips = errors.New("too many unreadable samples")

// MaxSubstituteTries bounds the search for a readable replacement: after
// this many unreadable samples in a row the stream fails.
const MaxSubstituteTries = 16

// SkipEvent reports one skipped sample to Skipper.OnSkip.
type SkipEvent struct {
	Epoch, Batch int64 // the batch the sample belonged to
	Index        int64 // the unreadable sample
	Substitute   int64 // the sample delivered in its place
	Err          error // the source's error, naming the file and record
	Skipped      int64 // samples skipped so far by this Skipper, this one included
}

// Skipper reads samples under an error policy. The zero value fails on
// the first error. It is safe for concurrent use; OnSkip is called from
// the reading goroutine and must be too.
type Skipper struct {
	Policy   ErrorPolicy
	MaxSkips int64           // with SkipOnError, fail after this many skips; 0 means no bound
	OnSkip   func(SkipEvent) // the metric and the log line; may be nil

	skipped atomic.Int64
}

// Skipped returns the number of samples skipped so far.
func (s *Skipper) Skipped() int64 { return s.skipped.Load() }

// skippable reports whether err is about the data of one sample. A bad
// index or a closed source is the caller's bug, never skipped.
func skippable(err error) bool {
	return !errors.Is(err, ErrIndex) && !errors.Is(err, ErrClosed)
}

// Sample reads sample idx of src into scratch. Under SkipOnError an
// unreadable sample is replaced by the first readable one of idx+1,
// idx+2, … (wrapping at the end, at most MaxSubstituteTries): in an image
// folder that is a neighbour of the same class, so class balance holds.
// used is the index whose label and pixels are returned. Errors are the
// source's, or wrap ErrTooManySkips.
func (s *Skipper) Sample(src Source, epoch, batch, idx int64, scratch []byte) (used int64, label int32, pix []byte, err error) {
	label, pix, err = src.Sample(idx, scratch)
	if err == nil || s.Policy != SkipOnError || !skippable(err) {
		return idx, label, pix, err
	}
	first := err
	n := src.Len()
	for try := int64(1); try <= MaxSubstituteTries && try < n; try++ {
		sub := (idx + try) % n
		label, pix, err = src.Sample(sub, scratch)
		if err != nil {
			if !skippable(err) {
				return idx, 0, nil, err
			}
			continue
		}
		k := s.skipped.Add(1)
		if s.OnSkip != nil {
			s.OnSkip(SkipEvent{Epoch: epoch, Batch: batch, Index: idx, Substitute: sub, Err: first, Skipped: k})
		}
		if s.MaxSkips > 0 && k > s.MaxSkips {
			return idx, 0, nil, fmt.Errorf("loader: %w: %d skipped, bound %d; the last: %w", ErrTooManySkips, k, s.MaxSkips, first)
		}
		return sub, label, pix, nil
	}
	return idx, 0, nil, fmt.Errorf("loader: %w: sample %d and the %d after it are unreadable; the first: %w",
		ErrTooManySkips, idx, min(MaxSubstituteTries, n-1), first)
}
