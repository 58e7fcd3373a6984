package benchmarks

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/clienttest"
	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/internal/convert"
	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/objstore"
	"github.com/loaderd/loaderd/loader/objstore/s3test"
)

// s3Shards is how many tar shards the CIFAR-10 JPEG tar is cut into.
const s3Shards = 10

// splitTar cuts the tar at src into n shards of consecutive members
// (train/CLASS/N.jpg, as in the original) under dir, named
// train-000.tar…, and returns their paths.
func splitTar(b *testing.B, src, dir string, n int) []string {
	f, err := os.Open(src)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	type member struct {
		h    *tar.Header
		data []byte
	}
	var all []member
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			b.Fatal(err)
		}
		all = append(all, member{h, data})
	}
	var paths []string
	for k := range n {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, m := range all[k*len(all)/n : (k+1)*len(all)/n] {
			if err := tw.WriteHeader(m.h); err != nil {
				b.Fatal(err)
			}
			tw.Write(m.data)
		}
		if err := tw.Close(); err != nil {
			b.Fatal(err)
		}
		p := filepath.Join(dir, fmt.Sprintf("train-%03d.tar", k))
		if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
			b.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

var (
	s3Once sync.Once
	s3Dir  string // the local shards
	s3Spec string // the same shards on the server
	s3Srv  *s3test.Server
)

// s3Data cuts the real CIFAR-10 JPEG tar into shards once and uploads
// them to a versitygw that lives as long as b: call it from the
// top-level benchmark, which outlives its sub-benchmarks.
func s3Data(b *testing.B) (local, remote string) {
	needJPEGTar(b)
	s3Once.Do(func() {
		objstore.SetLogger(slog.New(slog.DiscardHandler)) // a line per open would split the result lines
		srv := s3test.Start(b)
		s3Srv = srv
		s3Dir = b.TempDir()
		for _, p := range splitTar(b, cifarJPEGTar, s3Dir, s3Shards) {
			srv.PutFile(b, srv.Bucket(b, "cifar"), "jpg/"+filepath.Base(p), p)
		}
		// The sidecar indexes (loaderd index), beside the shards.
		idxs, err := convert.IndexTars([]string{s3Dir})
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range idxs {
			srv.PutFile(b, "cifar", "jpg/"+filepath.Base(p), p)
		}
		s3Spec = fmt.Sprintf("tar:s3://cifar/jpg/train-{000..%03d}.tar?endpoint=%s", s3Shards-1, srv.Endpoint)
	})
	if s3Spec == "" {
		b.Fatal("s3 data set-up failed earlier")
	}
	return "tar:" + s3Dir, s3Spec
}

// benchEpoch measures whole epochs, each one open of spec (the index;
// for s3:// the listing, and the fills the cache lacks) and one pass over
// every sample through the pipeline, with 2 workers. before runs ahead of
// each epoch, untimed.
func benchEpoch(b *testing.B, spec string, before func()) {
	var images int64
	var took, cpu, first time.Duration
	for b.Loop() {
		b.StopTimer()
		if before != nil {
			before()
		}
		b.StartTimer()
		cpu0 := clienttest.CPUTime()
		start := time.Now()
		n, f := runEpochFirst(b, spec)
		images += n
		first += f
		took += time.Since(start)
		// The server's CPU is not counted: versitygw is another process.
		cpu += clienttest.CPUTime() - cpu0
	}
	b.ReportMetric(float64(images)/took.Seconds(), "images/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(images), "cpu-µs/image")
	b.ReportMetric(float64(first.Microseconds())/1000/float64(b.N), "ms-to-first-batch")
}

func runEpoch(b *testing.B, spec string) int64 {
	n, _ := runEpochFirst(b, spec)
	return n
}

// runEpochFirst is runEpoch, also returning the time from the open to the
// first batch.
func runEpochFirst(b *testing.B, spec string) (int64, time.Duration) {
	start := time.Now()
	var first time.Duration
	src, err := loader.Open(spec)
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	pipe, err := augment.NewPipeline(src.Spec(), augment.CIFARTrain(sample.F32, sample.CHW)...)
	if err != nil {
		b.Fatal(err)
	}
	pool := loader.NewPool(2)
	defer pool.Close()
	l, err := loader.New(pool, loader.Config{Source: src, Pipeline: pipe, World: 1, Seed: 1, Shuffle: true,
		BatchSize: batchSize, InFlight: 4, Epochs: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	var n int64
	for {
		bt, err := l.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return n, first
		}
		if err != nil {
			b.Fatal(err)
		}
		if n == 0 {
			first = time.Since(start)
		}
		n += int64(len(bt.Indices))
		bt.Release()
	}
}

// BenchmarkS3 reads the real CIFAR-10 JPEGs, cut into 10 tar shards,
// from a local directory and from versitygw over loopback: the first
// epoch (an empty cache: every shard from the server) and later ones
// (from the cache). Each iteration is one whole epoch, open included
// (src=s3-ranged-get: one batch of reads). Target: epoch=cached ≥ 90% of
// src=local-tar.
//
//	go test ./benchmarks/ -run XXX -bench S3 -benchtime 5x
func BenchmarkS3(b *testing.B) {
	local, remote := s3Data(b)
	b.Run("src=local-tar/epoch=any", func(b *testing.B) { benchEpoch(b, local, nil) })
	// The first epoch, every shard from the server: index=whole waits for
	// whole shards (the open fetches them all); index=sidecar opens from
	// the sidecars and index=scan from ranged reads of the headers, then
	// serve samples by ranged reads while the shards fill the cache in
	// the background, Prefetch's first. order=uniform is the global
	// shuffle, order=shards:2 the shard-shuffle mode.
	for _, c := range []struct{ name, opts string }{
		{"index=whole/order=uniform", "&index=whole"},
		{"index=sidecar/order=uniform", ""},
		{"index=sidecar/order=shards:2", "&order=shards:2"},
		{"index=scan/order=uniform", "&index=scan"},
		{"index=scan/order=shards:2", "&index=scan&order=shards:2"},
	} {
		b.Run("src=s3-tar/epoch=first/"+c.name, func(b *testing.B) {
			root := b.TempDir()
			k := 0
			benchEpoch(b, remote+c.opts, func() {
				k++
				objstore.SetCache(filepath.Join(root, fmt.Sprint(k)), 0) // empty: every shard from the server
			})
			objstore.SetCache("", 0)
		})
	}
	// What the cache avoids: each sample a ranged GET of its member, in
	// the sampler's uniform order (so no two reads share a shard's pages),
	// 2 readers as 2 workers would be, and 32. No decoding: an upper
	// bound on uniform random access to uncached remote shards. One
	// iteration is a batch of 256 reads.
	for _, readers := range []int{2, 32} {
		b.Run(fmt.Sprintf("src=s3-ranged-get/readers=%d", readers), func(b *testing.B) {
			benchRangedGets(b, readers)
		})
	}
	b.Run("src=s3-tar/epoch=cached", func(b *testing.B) {
		objstore.SetCache(b.TempDir(), 0)
		defer objstore.SetCache("", 0)
		runEpoch(b, remote) // the first epoch fills the cache
		benchEpoch(b, remote, nil)
	})
}

type tarMember struct {
	key       string
	off, size int64
}

// members lists the regular members of the local shards with their
// offsets: archive/tar reads headers in whole blocks, so after Next the
// file's position is the member's data.
func members(b *testing.B) []tarMember {
	var out []tarMember
	paths, _ := filepath.Glob(filepath.Join(s3Dir, "train-*.tar"))
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		tr := tar.NewReader(f)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			off, _ := f.Seek(0, io.SeekCurrent)
			if h.Typeflag == tar.TypeReg {
				out = append(out, tarMember{"jpg/" + filepath.Base(p), off, h.Size})
			}
		}
		f.Close()
	}
	return out
}

func benchRangedGets(b *testing.B, readers int) {
	all := members(b)
	cl := s3Srv.Client()
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range readers {
		wg.Go(func() {
			buf := make([]byte, 64<<10)
			for {
				k := next.Add(1) - 1
				if k >= int64(b.N*batchSize) {
					return
				}
				m := all[rand.N(len(all))]
				out, err := cl.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("cifar"), Key: aws.String(m.key),
					Range: aws.String(fmt.Sprintf("bytes=%d-%d", m.off, m.off+m.size-1))})
				if err != nil {
					b.Error(err)
					return
				}
				n, err := io.ReadFull(out.Body, buf[:m.size])
				out.Body.Close()
				if err != nil || int64(n) != m.size {
					b.Errorf("member of %s at %d: %d bytes, %v", m.key, m.off, n, err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N*batchSize)/time.Since(start).Seconds(), "images/s")
}
