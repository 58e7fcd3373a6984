package loader

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
)

// varSource says its images vary in size but cannot say each one's.
type varSource struct{}

func (varSource) Len() int64 { return 10 }
func (varSource) Spec() augment.Spec {
	return augment.Spec{C: 3, DType: sample.U8, Layout: sample.HWC}
}
func (varSource) Classes() []string { return []string{"a"} }
func (varSource) Sample(int64, []byte) (int32, []byte, error) {
	return 0, nil, nil
}
func (varSource) String() string { return "var:" }
func (varSource) Close() error   { return nil }

// TestNewVariableSizeNeedsSizedSource: a source of varying sizes must be
// a SizedSource, whatever the pipeline.
func TestNewVariableSizeNeedsSizedSource(t *testing.T) {
	pipe, err := augment.NewPipeline(varSource{}.Spec(), augment.CenterCrop{Size: 8})
	if err != nil {
		t.Fatal(err)
	}
	pool := NewPool(1)
	defer pool.Close()
	_, err = New(pool, Config{Source: varSource{}, Pipeline: pipe, BatchSize: 2, World: 1})
	if err == nil || !strings.Contains(err.Error(), "SizedSource") {
		t.Fatalf("New: %v, want a SizedSource error", err)
	}
}

// regionSource is a SizedSource of n gradient images, image i of
// (40+7i)×(60+5i) pixels, that answers a Want as a decoder does: with
// honour(i), the crop asked for alone (at scale 1), else the whole image;
// shift moves the region it decodes and reports off the box asked for.
// It counts the crops it gave.
type regionSource struct {
	n      int64
	honour func(i int64) bool
	shift  int32
	crops  atomic.Int64
}

func (s *regionSource) Len() int64 { return s.n }
func (s *regionSource) Spec() augment.Spec {
	return augment.Spec{C: 3, DType: sample.U8, Layout: sample.HWC}
}
func (s *regionSource) Classes() []string { return []string{"a", "b"} }
func (s *regionSource) String() string    { return "region:" }
func (s *regionSource) Close() error      { return nil }
func (s *regionSource) MaxPixels() int64  { return 200 * 200 }
func (s *regionSource) Sample(i int64, scratch []byte) (int32, []byte, error) {
	l, pix, _, err := s.SampleSized(i, scratch, nil)
	return l, pix, err
}

func (s *regionSource) size(i int64) (h, w int) { return 40 + 7*int(i), 60 + 5*int(i) }

// image writes region box of image i into dst and returns its bytes.
func (s *regionSource) image(i int64, box sample.Box, dst []byte) []byte {
	_, w := s.size(i)
	pix := dst[:int(box.W)*int(box.H)*3]
	for y := range int(box.H) {
		for x := range int(box.W) {
			for c := range 3 {
				fx, fy := int(box.X)+x, int(box.Y)+y
				pix[(y*int(box.W)+x)*3+c] = byte(fx*3 + fy*5 + c*70 + int(i)*w)
			}
		}
	}
	return pix
}

func (s *regionSource) SampleSized(i int64, scratch []byte, want Scaler) (int32, []byte, Decoded, error) {
	h, w := s.size(i)
	var ask Want
	if want != nil {
		ask = want.Want(h, w)
	}
	if box := ask.Crop; box.W > 0 && s.honour(i) {
		box.X += s.shift
		s.crops.Add(1)
		return int32(i % 2), s.image(i, box, scratch), Decoded{H: h, W: w, Scale: 1, Box: box}, nil
	}
	whole := WholeImage(h, w, 1)
	return int32(i % 2), s.image(i, whole.Box, scratch), whole, nil
}

// TestSizedDecodedRegion: the pipeline is applied to the region the
// source says it decoded, whatever was asked: a stream of a random
// resized crop whose source decodes some samples' crops alone and the
// others whole gives, for every sample, the bytes of the pipeline on the
// whole image with the params drawn for its size; and a source that
// reports a region other than the crop asked for fails the sample
// (augment.ErrParams) rather than be resampled as if it were the crop.
func TestSizedDecodedRegion(t *testing.T) {
	ops, _ := augment.ParseOps("random_resized_crop=16,flip=0.5,out=u8:hwc")
	for _, c := range []struct {
		name   string
		honour func(i int64) bool
		shift  int32
		crops  bool // some crops decoded alone
		fails  bool
	}{
		{"whole images", func(int64) bool { return false }, 0, false, false},
		{"crops", func(int64) bool { return true }, 0, true, false},
		{"crops of even samples", func(i int64) bool { return i%2 == 0 }, 0, true, false},
		{"another region", func(int64) bool { return true }, 1, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := &regionSource{n: 12, honour: c.honour, shift: c.shift}
			pipe, err := augment.NewPipeline(src.Spec(), ops...)
			if err != nil {
				t.Fatal(err)
			}
			pool := NewPool(2)
			defer pool.Close()
			const seed = 7
			l, err := New(pool, Config{Source: src, Pipeline: pipe, Seed: seed, Shuffle: true, BatchSize: 4, World: 1, Epochs: 2, WithParams: true})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			whole, want := make([]byte, src.MaxPixels()*3), make([]byte, pipe.Out().Bytes())
			var sc augment.Scratch
			for {
				b, err := l.Next(context.Background())
				if err == io.EOF {
					break
				}
				if c.fails {
					if !errors.Is(err, augment.ErrParams) {
						t.Fatalf("a region other than the crop: %v, want augment.ErrParams", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				for k, idx := range b.Indices {
					h, w := src.size(idx)
					prm := pipe.DrawSized(seed, b.Epoch, idx, h, w)
					pix := src.image(idx, WholeImage(h, w, 1).Box, whole)
					if err := pipe.ApplySized(want, pix, h, w, prm, &sc); err != nil {
						t.Fatal(err)
					}
					if b.Params[k] != prm || !bytes.Equal(b.Sample(k), want) {
						t.Fatalf("epoch %d sample %d: params %+v (drawn %+v), bytes equal %v", b.Epoch, idx, b.Params[k], prm, bytes.Equal(b.Sample(k), want))
					}
				}
				b.Release()
			}
			if c.fails {
				t.Fatal("a region other than the crop was taken")
			}
			if got := src.crops.Load() > 0; got != c.crops {
				t.Fatalf("%d crops decoded alone", src.crops.Load())
			}
		})
	}
}
