package client_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/loaderd/loaderd/client"
	"github.com/loaderd/loaderd/sampler"
)

// TestGetSamplesEqualsStream: samples read by index, with the stream's
// spec, seed and epoch, are the stream's, bytes and params.
func TestGetSamplesEqualsStream(t *testing.T) {
	c := startDaemon(t, 100)
	ctx := context.Background()
	const spec = "crop=32:4,flip=0.5,color_jitter=0.4:0.4:0.4:0.1,normalize=cifar10,out=f32:chw"
	s, err := c.Open(ctx, client.StreamConfig{Dataset: "train", BatchSize: 6, Seed: 5, Epochs: 1, Start: sampler.Position{Epoch: 1}, Augment: spec, IncludeParams: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b, err := s.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	got, err := c.GetSamples(ctx, client.GetRequest{Dataset: "train", Indices: b.Indices, Augment: spec, Seed: 5, Epoch: 1, IncludeParams: true})
	if err != nil {
		t.Fatal(err)
	}
	n := len(b.Data) / len(b.Indices)
	for k, g := range got {
		if g.Index != b.Indices[k] || g.Label != b.Labels[k] || !bytes.Equal(g.Data, b.Data[k*n:(k+1)*n]) || g.Params != b.Params[k] {
			t.Errorf("sample %d (index %d): %+v differs from the stream's %+v", k, b.Indices[k], g.Params, b.Params[k])
		}
	}
	if _, err := c.GetSamples(ctx, client.GetRequest{Dataset: "train", Indices: []int64{100}}); err == nil {
		t.Error("index 100 of 100: no error")
	}
}
