package cache_test

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/cache"
	_ "github.com/loaderd/loaderd/loader/format/synthetic"
	_ "github.com/loaderd/loaderd/loader/format/tar"
	"github.com/loaderd/loaderd/loader/imagedec"
)

// stream is one stream's settings, and what it delivered.
type stream struct {
	seed        uint64
	rank, world int
	ops         string

	data   []byte
	idx    []int64
	labels []int32
	params []sample.Params
}

// runStreams runs the streams at once on one pool of 2 workers over src,
// for two epochs, and records every batch.
func runStreams(t *testing.T, src loader.Source, streams []stream) []stream {
	t.Helper()
	pool := loader.NewPool(2)
	defer pool.Close()
	out := slices.Clone(streams)
	var wg sync.WaitGroup
	errs := make(chan error, len(out))
	for k := range out {
		s := &out[k]
		ops, err := augment.ParseOps(s.ops)
		if err != nil {
			t.Fatal(err)
		}
		pipe, err := augment.NewPipeline(src.Spec(), ops...)
		if err != nil {
			t.Fatal(err)
		}
		l, err := loader.New(pool, loader.Config{Source: src, Pipeline: pipe, Rank: s.rank, World: s.world,
			Seed: s.seed, Shuffle: true, BatchSize: 32, Epochs: 2, WithParams: true})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer l.Close()
			for {
				b, err := l.Next(context.Background())
				if err == io.EOF {
					return
				}
				if err != nil {
					errs <- err
					return
				}
				s.data = append(s.data, b.Data...)
				s.idx = append(s.idx, b.Indices...)
				s.labels = append(s.labels, b.Labels...)
				s.params = append(s.params, b.Params...)
				b.Release()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return out
}

// sameStreams fails unless every stream delivered the same batches.
func sameStreams(t *testing.T, what string, a, b []stream) {
	t.Helper()
	for k := range a {
		if len(a[k].idx) == 0 || !bytes.Equal(a[k].data, b[k].data) || !slices.Equal(a[k].idx, b[k].idx) ||
			!slices.Equal(a[k].labels, b[k].labels) || !slices.Equal(a[k].params, b[k].params) {
			t.Errorf("%s: stream %d (seed %d, %s) differs with the cache: %d samples, pixels equal %v, indices %v, labels %v, params %v",
				what, k, a[k].seed, a[k].ops, len(a[k].idx), bytes.Equal(a[k].data, b[k].data), slices.Equal(a[k].idx, b[k].idx),
				slices.Equal(a[k].labels, b[k].labels), slices.Equal(a[k].params, b[k].params))
		}
	}
}

// fixedStreams differ in seed, rank, augmentation and output type.
var fixedStreams = []stream{
	{seed: 1, world: 1, ops: "crop=32:4,flip=0.5,normalize=cifar10,out=f32:chw"},
	{seed: 2, world: 1, ops: "crop=28,flip=0.5,out=u8:hwc"},
	{seed: 3, rank: 1, world: 2, ops: "crop=32:4,normalize=cifar10,out=bf16:chw"},
	{seed: 4, world: 1, ops: "flip=0.5,out=f16:hwc"},
}

// TestLoaderSameBatches: streams that share a cache (all of the dataset,
// half, a tenth) deliver byte for byte the batches they deliver without
// one, over an in-memory source and over a tar of JPEGs.
func TestLoaderSameBatches(t *testing.T) {
	n := 240
	if raceEnabled {
		n = 64 // the race detector slows the kernels tenfold
	}
	jpegs := jpegTar(t, n, func(i int) (int, int) { return 32, 32 })
	for _, spec := range []string{fmt.Sprint("synthetic:", 2*n), "tar:" + jpegs} {
		plain, err := loader.Open(spec)
		if err != nil {
			t.Fatal(err)
		}
		defer plain.Close()
		want := runStreams(t, plain, fixedStreams)
		whole := plain.Len() * int64(plain.Spec().Bytes())
		for _, size := range []int64{whole, whole / 2, whole / 10} {
			c, err := cache.Open(fmt.Sprintf("%s?cache=decoded&cache_bytes=%d", spec, size))
			if err != nil {
				t.Fatal(err)
			}
			got := runStreams(t, c, fixedStreams)
			sameStreams(t, fmt.Sprintf("%s with %d of %d bytes", spec, size, whole), want, got)
			s := c.(*cache.Cache).Stats()
			if s.Hits == 0 || s.Entries != size/int64(plain.Spec().Bytes()) {
				t.Errorf("%s with %d bytes: %+v, want hits and a full cache", spec, size, s)
			}
			c.Close()
		}
	}
}

// TestLoaderSameBatchesSized: over JPEGs of varying size, a stream whose
// crops the decoder takes at a DCT scale (random_resized_crop=24 of
// images up to 300 wide, with libjpeg-turbo) and one that needs them
// whole (resize=160: more than half of any side) share a cache and
// deliver what they deliver without.
func TestLoaderSameBatchesSized(t *testing.T) {
	p := jpegTar(t, 24, func(i int) (int, int) { return 40 + i*37%260, 60 + i*53%240 })
	spec := "tar:" + p + "?size=any&maxpixels=100000"
	streams := []stream{
		{seed: 1, world: 1, ops: "random_resized_crop=24,flip=0.5,out=u8:hwc"},
		{seed: 2, world: 1, ops: "resize=160,center_crop=128,normalize=imagenet,out=f32:chw"},
		{seed: 3, world: 1, ops: "random_resized_crop=32,flip=0.5,out=u8:chw"},
	}
	src, err := loader.Open(spec)
	if err != nil {
		t.Fatal(err)
	}
	plain := &countScaled{SizedSource: src.(loader.SizedSource)}
	defer plain.Close()
	want := runStreams(t, plain, streams)
	if imagedec.TurboAvailable() == nil && plain.scaled.Load() == 0 {
		t.Fatal("no sample was decoded at a DCT scale: the test would check nothing")
	}
	for _, size := range []string{"16MiB", "200KiB"} {
		c, err := cache.Open(spec + "&cache=decoded&cache_bytes=" + size)
		if err != nil {
			t.Fatal(err)
		}
		got := runStreams(t, c, streams)
		sameStreams(t, "size=any with cache_bytes="+size, want, got)
		if s := c.(*cache.Cache).Stats(); s.Hits == 0 || s.Entries == 0 || s.Bytes > s.Capacity {
			t.Errorf("cache_bytes=%s: %+v", size, s)
		}
		c.Close()
	}
}

// countScaled counts the samples its source decoded at a DCT scale.
type countScaled struct {
	loader.SizedSource
	scaled atomic.Int64
}

func (c *countScaled) SampleSized(i int64, scratch []byte, s loader.Scaler) (int32, []byte, loader.Decoded, error) {
	label, pix, dec, err := c.SizedSource.SampleSized(i, scratch, s)
	if dec.Scale > 1 {
		c.scaled.Add(1)
	}
	return label, pix, dec, err
}

// jpegTar writes a folder-layout tar of n JPEGs, image i of size(i), in
// three classes, and returns its path.
func jpegTar(t *testing.T, n int, size func(i int) (h, w int)) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "images.tar")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	for i := range n {
		h, w := size(i)
		img := image.NewRGBA(image.Rect(0, 0, w, h))
		for y := range h {
			for x := range w {
				img.Set(x, y, color.RGBA{uint8(x*255/w) ^ uint8(i*20), uint8(y * 255 / h), uint8((x*y)>>4 + i*9), 255})
			}
		}
		var b bytes.Buffer
		if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 90}); err != nil {
			t.Fatal(err)
		}
		hdr := &tar.Header{Name: fmt.Sprintf("train/c%d/%03d.jpg", i%3, i), Mode: 0o644, Size: int64(b.Len()), Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(b.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}
