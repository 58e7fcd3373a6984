package loader_test

import (
	"bytes"
	"errors"
	"sync"
	"testing"

	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/format/synthetic"
)

// flaky is a source, a synthetic one in these tests, whose listed samples
// are corrupt.
type flaky struct {
	loader.Source
	bad map[int64]bool
}

func (f flaky) Sample(i int64, scratch []byte) (int32, []byte, error) {
	if f.bad[i] {
		return 0, nil, &loader.RecordError{File: "flaky", Record: i, Err: loader.ErrCorrupt}
	}
	return f.Source.Sample(i, scratch)
}

func TestSkipper(t *testing.T) {
	src := flaky{synthetic.New(10, 1), map[int64]bool{3: true, 4: true, 9: true}}
	scratch := make([]byte, 3072)
	want := func(i int64) (int32, []byte) {
		l, p, _ := src.Source.Sample(i, make([]byte, 3072))
		return l, p
	}
	for _, tc := range []struct {
		name     string
		s        *loader.Skipper
		idx      int64
		used     int64
		err      error
		skipped  int64
		maxSkips int64
	}{
		{"fail: a good sample", &loader.Skipper{}, 2, 2, nil, 0, 0},
		{"fail: a bad sample", &loader.Skipper{}, 3, 3, loader.ErrCorrupt, 0, 0},
		{"skip: the next readable", &loader.Skipper{Policy: loader.SkipOnError}, 3, 5, nil, 1, 0},
		{"skip: wraps at the end", &loader.Skipper{Policy: loader.SkipOnError}, 9, 0, nil, 1, 0},
		{"skip: never a bad index", &loader.Skipper{Policy: loader.SkipOnError}, 10, 10, loader.ErrIndex, 0, 0},
		{"skip: over the bound", &loader.Skipper{Policy: loader.SkipOnError, MaxSkips: 1}, 3, 3, loader.ErrTooManySkips, 2, 1},
	} {
		var events []loader.SkipEvent
		tc.s.OnSkip = func(e loader.SkipEvent) { events = append(events, e) }
		if tc.maxSkips > 0 { // one skip already spent
			tc.s.Sample(src, 0, 0, 4, scratch)
			events = nil
		}
		used, label, pix, err := tc.s.Sample(src, 2, 7, tc.idx, scratch)
		if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) || used != tc.used || tc.s.Skipped() != tc.skipped {
			t.Fatalf("%s: used %d, skipped %d, %v; want %d, %d, %v", tc.name, used, tc.s.Skipped(), err, tc.used, tc.skipped, tc.err)
		}
		if err == nil {
			wl, wp := want(used)
			if label != wl || !bytes.Equal(pix, wp) {
				t.Fatalf("%s: pixels or label are not sample %d's", tc.name, used)
			}
		}
		if tc.skipped > 0 && tc.maxSkips == 0 {
			e := events[0]
			if len(events) != 1 || e.Epoch != 2 || e.Batch != 7 || e.Index != tc.idx || e.Substitute != tc.used ||
				!errors.Is(e.Err, loader.ErrCorrupt) || e.Skipped != 1 {
				t.Fatalf("%s: events %+v", tc.name, events)
			}
		}
	}
	// Nothing readable within reach: the stream fails.
	all := flaky{synthetic.New(40, 1), map[int64]bool{}}
	for i := range int64(20) {
		all.bad[i] = true
	}
	if _, _, _, err := (&loader.Skipper{Policy: loader.SkipOnError}).Sample(all, 0, 0, 0, scratch); !errors.Is(err, loader.ErrTooManySkips) || !errors.Is(err, loader.ErrCorrupt) {
		t.Fatalf("17 bad in a row: %v, want ErrTooManySkips wrapping ErrCorrupt", err)
	}
}

// TestSkipperConcurrent: the counter and the substitutes do not depend on
// which goroutine reads what.
func TestSkipperConcurrent(t *testing.T) {
	src := flaky{synthetic.New(1000, 2), map[int64]bool{}}
	for i := int64(0); i < 1000; i += 7 {
		src.bad[i] = true
	}
	s := &loader.Skipper{Policy: loader.SkipOnError}
	used := make([]int64, 1000)
	var wg sync.WaitGroup
	for w := range int64(4) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			scratch := make([]byte, 3072)
			for i := w; i < 1000; i += 4 {
				u, _, _, err := s.Sample(src, 0, 0, i, scratch)
				if err != nil {
					t.Error(err)
					return
				}
				used[i] = u
			}
		}()
	}
	wg.Wait()
	if s.Skipped() != 143 {
		t.Fatalf("skipped %d, want 143", s.Skipped())
	}
	for i, u := range used {
		if want := int64(i); src.bad[want] && u != want+1 || !src.bad[want] && u != want {
			t.Fatalf("sample %d delivered as %d", i, u)
		}
	}
}
