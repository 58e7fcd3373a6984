package loader_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/internal/convert"
	"github.com/loaderd/loaderd/loader"
	_ "github.com/loaderd/loaderd/loader/format/arrow"
	"github.com/loaderd/loaderd/loader/format/synthetic"
	_ "github.com/loaderd/loaderd/loader/format/tar"
	"github.com/loaderd/loaderd/loader/internal/loadertest"
)

// mappedFormat writes a dataset of one mapped file into dir and returns
// its FORMAT:PATH, the file, and how many bytes at its end hold its last
// few samples (fewer than loader.MaxSubstituteTries of them) and trailer.
type mappedFormat func(t *testing.T, dir string) (spec, file string, tail int64)

var mappedFormats = map[string]mappedFormat{
	// A view of the mapping goes to the kernel: it faults there.
	"cifar": func(t *testing.T, dir string) (string, string, int64) {
		path := filepath.Join(dir, "data_batch_1.bin")
		var b bytes.Buffer
		for i := range 200 {
			b.WriteByte(byte(i % 10))
			b.Write(bytes.Repeat([]byte{byte(i)}, 32*32*3))
		}
		writeFile(t, path, b.Bytes())
		return "cifar:" + path, path, 3 * 3073
	},
	// The decoder reads the mapping inside Sample: it faults there.
	"tar": func(t *testing.T, dir string) (string, string, int64) {
		path := filepath.Join(dir, "shard.tar")
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		png := loadertest.Fixture(t, "img/rgb.png")
		for i := range 300 {
			tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("train/c%d/%03d.png", i/100, i), Mode: 0o644, Size: int64(len(png))})
			tw.Write(png)
		}
		tw.Close()
		writeFile(t, path, b.Bytes())
		return "tar:" + path, path, 1024 + 3*1024 // the end-of-archive blocks, three members
	},
	// Like cifar, through the Arrow IPC reader's index.
	"arrow": func(t *testing.T, dir string) (string, string, int64) {
		path := filepath.Join(dir, "part-0.arrow")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		syn := synthetic.New(100, 1)
		w, err := convert.NewArrowWriter(f, syn.Spec(), syn.Classes(), 16)
		if err != nil {
			t.Fatal(err)
		}
		scratch := make([]byte, syn.Spec().Bytes())
		for i := range syn.Len() {
			l, p, _ := syn.Sample(i, scratch)
			w.Write(l, p)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		return "arrow:" + path, path, 2048 + 2*3072 // the footer, two rows
	},
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// truncate cuts file to size rounded down to a page, so that every page
// past the cut is gone from the mapping: touching it faults.
func truncate(t *testing.T, file string, size int64) {
	t.Helper()
	page := int64(os.Getpagesize())
	if err := os.Truncate(file, size/page*page); err != nil {
		t.Fatal(err)
	}
}

func fileSize(t *testing.T, file string) int64 {
	t.Helper()
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// openMapped opens a format's test dataset and a plain in-order loader
// on it, one batch in flight.
func openMapped(t *testing.T, pool *loader.Pool, mk mappedFormat, mod func(*loader.Config)) (*loader.Loader, string, int64) {
	if runtime.GOOS != "linux" {
		t.Skip("skipped: files are mapped on Linux only")
	}
	spec, file, tail := mk(t, t.TempDir())
	src, err := loader.Open(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	pipe, err := augment.NewPipeline(src.Spec(), augment.Output{Layout: sample.HWC})
	if err != nil {
		t.Fatal(err)
	}
	cfg := loader.Config{Source: src, Pipeline: pipe, World: 1, BatchSize: 8, InFlight: 1, Epochs: 1}
	if mod != nil {
		mod(&cfg)
	}
	l, err := loader.New(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, file, tail
}

// TestTruncatedFileFailsTheSample: a mapped file cut to half its size
// while a stream reads it faults the workers that touch the lost pages.
// Without the recovery that kills the test process (fatal error: fault,
// SIGBUS); with it, FailOnError ends the stream with a *SampleError whose
// *RecordError names the file and wraps ErrFault, and another stream on
// the same pool reads on to its end.
func TestTruncatedFileFailsTheSample(t *testing.T) {
	loader.SkipWithoutFaultAddress(t)
	for name, mk := range mappedFormats {
		t.Run(name, func(t *testing.T) {
			pool := loader.NewPool(2)
			defer pool.Close()
			l, file, _ := openMapped(t, pool, mk, nil)
			other := newTestLoader(t, pool, synthetic.New(300, 1), func(c *loader.Config) { c.Epochs = 1 })
			b, err := l.Next(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			b.Release()
			truncate(t, file, fileSize(t, file)/2)
			for err == nil {
				if b, err = l.Next(context.Background()); err == nil {
					b.Release()
				}
			}
			var re *loader.RecordError
			var se *loader.SampleError
			if !errors.Is(err, loader.ErrFault) || !errors.As(err, &re) || !errors.As(err, &se) || !strings.HasPrefix(re.File, file) {
				t.Fatalf("after the truncation: %v; want a SampleError wrapping ErrFault naming %s", err, file)
			}
			t.Log(err)
			if n := len(drain(t, other, 0)); n != 300/7+1 {
				t.Fatalf("the other stream delivered %d batches after the fault, want %d", n, 300/7+1)
			}
		})
	}
}

// TestTruncatedFileSkipsTheSample: under SkipOnError, the samples a
// truncation cut off are replaced and reported, each with an ErrFault
// naming the file, and the stream reads its epoch to the end.
func TestTruncatedFileSkipsTheSample(t *testing.T) {
	loader.SkipWithoutFaultAddress(t)
	for name, mk := range mappedFormats {
		t.Run(name, func(t *testing.T) {
			pool := loader.NewPool(2)
			defer pool.Close()
			var mu sync.Mutex
			var skips []loader.SkipEvent
			l, file, tail := openMapped(t, pool, mk, func(c *loader.Config) {
				c.OnError = loader.SkipOnError
				c.OnSkip = func(e loader.SkipEvent) {
					mu.Lock()
					skips = append(skips, e)
					mu.Unlock()
				}
			})
			b, err := l.Next(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			b.Release()
			truncate(t, file, fileSize(t, file)-tail)
			lost := map[int64]bool{}
			for {
				b, err := l.Next(context.Background())
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				b.Release()
			}
			mu.Lock()
			defer mu.Unlock()
			if len(skips) == 0 || len(skips) >= loader.MaxSubstituteTries || int64(len(skips)) != l.Skipped() {
				t.Fatalf("%d skips (Skipped %d), want 1 to %d", len(skips), l.Skipped(), loader.MaxSubstituteTries-1)
			}
			for _, e := range skips {
				lost[e.Index] = true
				var re *loader.RecordError
				if !errors.Is(e.Err, loader.ErrFault) || !errors.As(e.Err, &re) || !strings.HasPrefix(re.File, file) {
					t.Fatalf("skip of sample %d: %v; want ErrFault naming %s", e.Index, e.Err, file)
				}
			}
			for _, e := range skips {
				if lost[e.Substitute] {
					t.Fatalf("sample %d was replaced by %d, which was lost too", e.Index, e.Substitute)
				}
			}
			t.Logf("%d samples skipped; the first: %v", len(skips), skips[0].Err)
		})
	}
}

// TestNamer: the mapped formats name their samples (what errors and
// clients show), a hold-out part of a Namer names its samples as its
// source does, and a source without names gives a part without them.
func TestNamer(t *testing.T) {
	want := map[string]struct {
		i    int64
		name string
	}{"cifar": {180, "#180"}, "tar": {180, "(train/c1/180.png)"}, "arrow": {80, "#80"}}
	for name, mk := range mappedFormats {
		spec, file, _ := mk(t, t.TempDir())
		src, err := loader.Open(spec)
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		w := want[name]
		if n, ok := loader.As[loader.Namer](src); !ok || n.Name(w.i) != file+w.name {
			t.Fatalf("%s: not a Namer, or sample %d not named %q", name, w.i, file+w.name)
		}
	}
	spec, file, _ := mappedFormats["cifar"](t, t.TempDir())
	val, err := loader.Open(spec + "?holdout=2&part=val") // the last two of each class: 180, 190, 181, …
	if err != nil {
		t.Fatal(err)
	}
	defer val.Close()
	if n, ok := loader.As[loader.Namer](val); !ok || n.Name(0) != file+"#180" {
		t.Fatalf("a part of cifar: Namer %v, sample 0 named %q, want %q", ok, n.Name(0), file+"#180")
	}
	syn, err := loader.Open("synthetic:100?holdout=2")
	if err != nil {
		t.Fatal(err)
	}
	defer syn.Close()
	if _, ok := loader.As[loader.Namer](syn); ok {
		t.Fatal("a part of a source without names is a Namer")
	}
}
