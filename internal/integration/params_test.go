package integration_test

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client"
	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/loader"
	_ "github.com/loaderd/loaderd/loader/format/folder"
)

// varyingFolder writes JPEGs of varying sizes in class folders.
func varyingFolder(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	sizes := [][2]int{{48, 64}, {300, 200}, {120, 121}, {33, 90}, {97, 150}, {70, 70}, {211, 133}, {64, 180}}
	for i, hw := range sizes {
		img := image.NewRGBA(image.Rect(0, 0, hw[1], hw[0]))
		for y := range hw[0] {
			for x := range hw[1] {
				img.Set(x, y, color.RGBA{uint8(x * 255 / hw[1]), uint8(y*255/hw[0]) ^ uint8(i*30), uint8(x*y>>3 + i), 255})
			}
		}
		p := filepath.Join(dir, fmt.Sprintf("c%d", i%2), fmt.Sprintf("%02d.jpg", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 90}); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// scaler asks the pipeline for the DCT scale, as the daemon's workers do.
type scaler struct {
	pipe       *augment.Pipeline
	seed       uint64
	epoch, idx int64
}

func (s scaler) Want(h, w int) loader.Want {
	return loader.Want{Scale: s.pipe.Scale(h, w, s.pipe.DrawSized(s.seed, s.epoch, s.idx, h, w))}
}

// TestResizedCropParams streams a random_resized_crop dataset of varying
// image sizes through a daemon, inline and over shared memory, and
// rebuilds every sample from the source with the params the client
// received: each box lies inside its image and equals the draw for the
// sample's size, and applying it (and the flip) gives the bytes sent.
func TestResizedCropParams(t *testing.T) {
	spec := "folder:" + varyingFolder(t) + "?size=any&maxpixels=100000"
	src, pipe, c := served(t, spec, "random_resized_crop=24,flip=0.5,out=u8:hwc", "any")
	ss := src.(loader.SizedSource)
	const seed = 3
	scratch := make([]byte, 100000*3)
	want := make([]byte, pipe.Out().Bytes())
	var sc augment.Scratch
	for _, shm := range []bool{false, true} {
		s, err := c.Open(context.Background(), client.StreamConfig{Dataset: "any", BatchSize: 3, Seed: seed,
			Augment: pipe.String(), SharedMemory: shm, IncludeParams: true, Epochs: 2})
		if err != nil {
			t.Fatal(err)
		}
		boxes, flips := map[sample.Box]bool{}, 0
		for {
			b, err := s.Next(context.Background())
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(b.Params) != len(b.Indices) {
				t.Fatalf("%d params for %d samples", len(b.Params), len(b.Indices))
			}
			n := pipe.Out().Bytes()
			for k, idx := range b.Indices {
				got := b.Params[k]
				_, pix, dec, err := ss.SampleSized(idx, scratch, scaler{pipe, seed, b.Epoch, idx})
				h, w, d := dec.H, dec.W, dec.Scale
				if err != nil {
					t.Fatal(err)
				}
				prm := pipe.DrawSized(seed, b.Epoch, idx, h, w)
				bx := got.Box
				if got != prm || bx.W <= 0 || bx.H <= 0 || bx.X < 0 || bx.Y < 0 || int(bx.X+bx.W) > w || int(bx.Y+bx.H) > h {
					t.Fatalf("shm %v epoch %d sample %d (%dx%d): params %+v, drawn %+v", shm, b.Epoch, idx, w, h, got, prm)
				}
				if err := pipe.ApplyScaled(want, pix, h, w, d, got, &sc); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(b.Data[k*n:(k+1)*n], want) {
					t.Fatalf("shm %v epoch %d sample %d: bytes differ from the source resampled with the received box", shm, b.Epoch, idx)
				}
				boxes[bx] = true
				if got.Flip {
					flips++
				}
			}
			if err := b.Release(); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if len(boxes) < 12 || flips == 0 { // 16 draws over 8 images: the boxes vary
			t.Errorf("shm %v: %d distinct boxes, %d flips in 16 samples", shm, len(boxes), flips)
		}
	}
}
