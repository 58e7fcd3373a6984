package loadertest

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"os"
	"testing"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/loader"
)

// Varying is one image of VaryingSet: its size and label.
type Varying struct {
	W, H  int
	Label int32
}

// VaryingSet is a tiny dataset of images of varying size (size=any), in
// three classes, sorted by class so that a folder-layout tar of it
// (WriteVaryingTar) has the same order as a table of it.
var VaryingSet = []Varying{{48, 64, 0}, {300, 200, 0}, {33, 120, 0}, {64, 64, 1}, {200, 75, 1}, {17, 17, 2}, {120, 160, 2}}

// VaryingJPEGs encodes VaryingSet with Go's encoder: gradients that differ
// per image, a few KiB each.
func VaryingJPEGs(t testing.TB) [][]byte {
	t.Helper()
	var out [][]byte
	for i, v := range VaryingSet {
		img := image.NewRGBA(image.Rect(0, 0, v.W, v.H))
		for y := range v.H {
			for x := range v.W {
				img.Set(x, y, color.RGBA{uint8(x * 255 / v.W), uint8(y*255/v.H) ^ uint8(i*40), uint8((x + y) * 3), 255})
			}
		}
		var b bytes.Buffer
		if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 85}); err != nil {
			t.Fatal(err)
		}
		out = append(out, b.Bytes())
	}
	return out
}

// WriteVaryingTar writes imgs (VaryingJPEGs) as a folder-layout tar,
// train/cLABEL/NN.jpg.
func WriteVaryingTar(t testing.TB, path string, imgs [][]byte) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i, b := range imgs {
		h := &tar.Header{Name: fmt.Sprintf("train/c%d/%02d.jpg", VaryingSet[i].Label, i), Mode: 0o644, Size: int64(len(b))}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// StreamResized reads two shuffled epochs of src, a source of varying size,
// through random_resized_crop=24 and a flip with two workers, and returns
// the batches' bytes: two formats holding the same images must give the
// same bytes.
func StreamResized(t testing.TB, src loader.Source) []byte {
	t.Helper()
	pipe, err := augment.NewPipeline(src.Spec(), augment.RandomResizedCrop{Size: 24}, augment.RandomHorizontalFlip{P: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	pool := loader.NewPool(2)
	defer pool.Close()
	l, err := loader.New(pool, loader.Config{Source: src, Pipeline: pipe, Seed: 3, Shuffle: true, BatchSize: 3, World: 1, Epochs: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var out []byte
	for {
		b, err := l.Next(context.Background())
		if err != nil {
			break
		}
		out = append(out, b.Data...)
		b.Release()
	}
	if want := 2 * src.Len() * 24 * 24 * 3; int64(len(out)) != want {
		t.Fatalf("streamed %d bytes of %s, want %d", len(out), src, want)
	}
	return out
}
