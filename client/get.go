package client

import (
	"context"
	"fmt"

	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/client/wire"
	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// GetRequest names samples of a dataset to read one by one (map-style
// access), and in what form. See loader.proto's GetSamples.
type GetRequest struct {
	Dataset string
	Indices []int64 // 1..1024 dataset indices, 0 ≤ i < the dataset's size
	// Augment is a spec as StreamConfig's; empty means none (not the
	// dataset's default): the decoded image, U8 HWC at its own size.
	Augment string
	DType   sample.DType // 0 keeps the spec's (without a spec, U8)
	Layout  sample.Layout
	// Seed and Epoch select the augmentation: a sample equals the one a
	// stream with Seed delivers for its index in Epoch.
	Seed          uint64
	Epoch         int64
	IncludeParams bool
}

// Sample is one sample of GetSamples.
type Sample struct {
	Index  int64
	Label  int32
	DType  sample.DType
	Layout sample.Layout
	Shape  []int  // in Layout's order: H, W, C or C, H, W
	Data   []byte // the sample's own buffer
	Params sample.Params
}

// GetSamples reads the samples req names, decoded (and augmented, with a
// spec), in req's order: for inspecting a dataset, a map-style PyTorch
// Dataset, or checking one sample of a stream. Of a pool, the first
// daemon answers. The daemon bounds a call to 1024 samples and 256 MiB.
func (c *Client) GetSamples(ctx context.Context, req GetRequest) ([]Sample, error) {
	resp, err := c.api.GetSamples(ctx, &pb.GetSamplesRequest{Dataset: req.Dataset, Indices: req.Indices,
		Augment: req.Augment, Dtype: pb.DType(req.DType), Layout: pb.Layout(req.Layout),
		Seed: req.Seed, Epoch: req.Epoch, IncludeParams: req.IncludeParams})
	if err != nil {
		return nil, fmt.Errorf("client: get samples of %q: %w", req.Dataset, err)
	}
	var params []sample.Params
	if p := resp.GetParams(); p != nil {
		params = paramsFrom(nil, &wire.Params{Top: p.Top, Left: p.Left, Flip: p.Flip, Height: p.Height, Width: p.Width,
			JitterOrder: p.JitterOrder, Jitter: p.Jitter, Gray: p.Gray, Sigma: p.Sigma, NumOps: p.NumOps, Op: p.Op,
			Magnitude: p.Magnitude, Erased: p.Erased, EraseTop: p.EraseTop, EraseLeft: p.EraseLeft,
			EraseHeight: p.EraseHeight, EraseWidth: p.EraseWidth, EraseNoise: p.EraseNoise})
	}
	out := make([]Sample, len(resp.GetSamples()))
	for k, s := range resp.GetSamples() {
		o := &out[k]
		*o = Sample{Index: s.GetIndex(), Label: s.GetLabel(), DType: sample.DType(resp.GetDtype()),
			Layout: sample.Layout(resp.GetLayout()), Data: s.GetData()}
		for _, d := range s.GetShape() {
			o.Shape = append(o.Shape, int(d))
		}
		if k < len(params) {
			o.Params = params[k]
		}
	}
	return out, nil
}
