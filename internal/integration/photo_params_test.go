package integration_test

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client"
	"github.com/loaderd/loaderd/loader"
)

// TestPhotometricParams streams a chain with photometric ops and random
// erasing through a daemon, inline and over shared memory: the client
// receives each sample's draws (jitter order and factors, grayscale,
// sigma, the TrivialAugmentWide operation, the erased box and its noise
// key) equal to the pipeline's, and applying them to the source gives the
// bytes sent.
func TestPhotometricParams(t *testing.T) {
	spec := "folder:" + varyingFolder(t) + "?size=any&maxpixels=100000"
	src, pipe, c := served(t, spec, "random_resized_crop=24,flip,trivial_augment_wide,color_jitter=0.4:0.4:0.4:0.1,"+
		"random_grayscale=0.3,gaussian_blur=3,normalize=imagenet,random_erasing=0.7:0.02-0.33:0.3-3.3:random", "any")
	ss := src.(loader.SizedSource)
	const seed = 5
	scratch := make([]byte, 100000*3)
	want := make([]byte, pipe.Out().Bytes())
	var sc augment.Scratch
	for _, shm := range []bool{false, true} {
		s, err := c.Open(context.Background(), client.StreamConfig{Dataset: "any", BatchSize: 3, Seed: seed,
			Augment: pipe.String(), SharedMemory: shm, IncludeParams: true, Epochs: 2})
		if err != nil {
			t.Fatal(err)
		}
		erased, ops := 0, 0
		for {
			b, err := s.Next(context.Background())
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			n := pipe.Out().Bytes()
			for k, idx := range b.Indices {
				got := b.Params[k]
				_, pix, dec, err := ss.SampleSized(idx, scratch, scaler{pipe, seed, b.Epoch, idx})
				if err != nil {
					t.Fatal(err)
				}
				if prm := pipe.DrawSized(seed, b.Epoch, idx, dec.H, dec.W); got != prm {
					t.Fatalf("shm %v epoch %d sample %d: params %+v, drawn %+v", shm, b.Epoch, idx, got, prm)
				}
				if err := pipe.ApplyScaled(want, pix, dec.H, dec.W, dec.Scale, got, &sc); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(b.Data[k*n:(k+1)*n], want) {
					t.Fatalf("shm %v epoch %d sample %d: bytes differ from the source augmented with the received params", shm, b.Epoch, idx)
				}
				if got.Erase.Applied {
					erased++
				}
				ops += int(got.Photo.NumOps)
			}
			if err := b.Release(); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if erased == 0 || ops == 0 {
			t.Fatalf("shm %v: %d samples erased, %d operations: the params were not carried", shm, erased, ops)
		}
	}
}
