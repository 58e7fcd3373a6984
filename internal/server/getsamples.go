package server

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/client/wire"
	"github.com/loaderd/loaderd/loader"
	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// maxGetSamples bounds the indices of one GetSamples call (see
// loader.proto); its output is bounded by wire.MaxBatchBytes, an inline
// batch's limit, so that any client that takes batches takes it.
const maxGetSamples = 1024

// getsWidth is how many GetSamples calls decode at once. They run on their
// handlers' goroutines, not the stream workers', so that a flood of them
// takes at most this many cores from the streams and never queues ahead
// of a stream's batches; the rest wait their turn (or their deadline).
const getsWidth = 2

// sampleOverhead is a sample's share of a response beside its bytes: its
// message's fields and framing, and its slice of params.
const sampleOverhead = 128

// GetSamples decodes, and with a spec augments, the samples the request
// names (map-style access), within the memory budget.
func (s *Server) GetSamples(ctx context.Context, req *pb.GetSamplesRequest) (*pb.GetSamplesResponse, error) {
	select {
	case <-s.stopping:
		return nil, status.Error(codes.Unavailable, errStopping.Error())
	default:
	}
	d, pipe, err := s.getPlan(req)
	if err != nil {
		return nil, err
	}
	select {
	case s.gets <- struct{}{}:
		defer func() { <-s.gets }()
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	case <-s.stopping:
		return nil, status.Error(codes.Unavailable, errStopping.Error())
	}
	rd := loader.NewReader(d.Source)
	var held int64
	defer func() { s.mem.release(memGet, held) }()
	var total int64 // output bytes: varying sizes are known only once decoded
	take := func(n int64, what string) error {
		if err := s.mem.reserve(memGet, n); err != nil {
			return status.Errorf(codes.ResourceExhausted, "loaderd: GetSamples of %q: %s: %v (--memory-limit)", d.Name, what, err)
		}
		held += n
		return nil
	}
	if err := take(rd.ScratchBytes()+int64(len(req.GetIndices()))*sampleOverhead, "decode scratch"); err != nil {
		return nil, err
	}
	resp := &pb.GetSamplesResponse{Dtype: pb.DType_DTYPE_U8, Layout: pb.Layout_LAYOUT_HWC,
		Samples: make([]*pb.GetSamplesResponse_Sample, 0, len(req.GetIndices()))}
	if pipe != nil {
		resp.Dtype, resp.Layout = pb.DType(pipe.Out().DType), pb.Layout(pipe.Out().Layout)
		if req.GetAugment() != "" {
			resp.Augment = augment.FormatOps(pipe.Ops())
		}
	}
	var params []sample.Params
	for _, i := range req.GetIndices() {
		if err := ctx.Err(); err != nil {
			return nil, status.FromContextError(err).Err()
		}
		alloc := func(n int) ([]byte, error) {
			if total += int64(n); total > wire.MaxBatchBytes {
				return nil, status.Errorf(codes.InvalidArgument, "loaderd: GetSamples of %q: the samples up to index %d are %d bytes, over the %d-byte limit: ask for fewer",
					d.Name, i, total, wire.MaxBatchBytes)
			}
			if err := take(int64(n), fmt.Sprintf("sample %d", i)); err != nil {
				return nil, err
			}
			return make([]byte, n), nil
		}
		one, err := rd.Read(i, pipe, req.GetSeed(), req.GetEpoch(), alloc)
		if err != nil {
			return nil, s.getError(d, i, err)
		}
		shape := make([]int64, len(one.Shape))
		for k, n := range one.Shape {
			shape[k] = int64(n)
		}
		resp.Samples = append(resp.Samples, &pb.GetSamplesResponse_Sample{Index: i, Label: one.Label, Shape: shape, Data: one.Data})
		params = append(params, one.Params)
	}
	if req.GetIncludeParams() && req.GetAugment() != "" {
		resp.Params = paramsMessage(pipe, params)
	}
	return resp, nil
}

// getPlan checks a GetSamples request, naming every problem at once, and
// builds its pipeline: nil for the raw decode of a dataset of varying size.
func (s *Server) getPlan(req *pb.GetSamplesRequest) (*Dataset, *augment.Pipeline, error) {
	var long []string
	if n := len(req.GetDataset()); n > wire.MaxNameLen {
		long = append(long, fmt.Sprintf("dataset of %d bytes, over the %d-byte limit", n, wire.MaxNameLen))
	}
	if n := len(req.GetAugment()); n > wire.MaxAugmentLen {
		long = append(long, fmt.Sprintf("augment of %d bytes, over the %d-byte limit", n, wire.MaxAugmentLen))
	}
	if n := len(req.GetIndices()); n < 1 || n > maxGetSamples {
		long = append(long, fmt.Sprintf("%d indices, want 1..%d", n, maxGetSamples))
	}
	if len(long) > 0 {
		return nil, nil, status.Errorf(codes.InvalidArgument, "loaderd: invalid GetSamples: %s", strings.Join(long, "; "))
	}
	d, ok := s.datasets[req.GetDataset()]
	if !ok {
		return nil, nil, status.Errorf(codes.NotFound, "loaderd: unknown dataset %q (registered: %s)",
			req.GetDataset(), strings.Join(s.names(), ", "))
	}
	var bad []string
	size := d.Source.Len()
	for _, i := range req.GetIndices() {
		if i < 0 || i >= size {
			bad = append(bad, fmt.Sprintf("index %d outside 0..%d (dataset %q has %d samples)", i, size-1, d.Name, size))
			break // one is enough; a thousand would bury the rest
		}
	}
	pipe, err := getPipeline(d, req)
	if err != nil {
		bad = append(bad, strings.TrimPrefix(err.Error(), "augment: "))
	}
	if pipe != nil && pipe.Mixer() != nil {
		bad = append(bad, "mixup and cutmix mix a batch, and GetSamples returns samples: leave them out of augment")
	}
	if pipe != nil && len(bad) == 0 {
		if n := int64(len(req.GetIndices())) * int64(pipe.Out().Bytes()); n > wire.MaxBatchBytes {
			bad = append(bad, fmt.Sprintf("%d samples of %d bytes are %d bytes, over the %d-byte limit: ask for fewer",
				len(req.GetIndices()), pipe.Out().Bytes(), n, wire.MaxBatchBytes))
		}
	}
	if len(bad) > 0 {
		return nil, nil, status.Errorf(codes.InvalidArgument, "loaderd: invalid GetSamples of %q: %s", d.Name, strings.Join(bad, "; "))
	}
	return d, pipe, nil
}

// getPipeline is the request's chain: a stream's (buildPipeline) for a
// spec; without one, for a fixed-size dataset, its output op alone (U8
// HWC unless the request says otherwise), which converts the decode and
// moves no pixel; nil for a dataset of varying size, whose decode has no
// one shape to convert to.
func getPipeline(d *Dataset, req *pb.GetSamplesRequest) (*augment.Pipeline, error) {
	o := &pb.Open{Augment: req.GetAugment(), Dtype: req.GetDtype(), Layout: req.GetLayout()}
	if o.Augment != "" {
		return buildPipeline(d, o)
	}
	if in := d.Source.Spec(); in.H == 0 && in.W == 0 {
		if (o.Dtype != pb.DType_DTYPE_UNSPECIFIED && o.Dtype != pb.DType_DTYPE_U8) ||
			(o.Layout != pb.Layout_LAYOUT_UNSPECIFIED && o.Layout != pb.Layout_LAYOUT_HWC) {
			return nil, fmt.Errorf("dataset %q has images of varying size, decoded as U8 HWC: to convert them, give augment (%s)", d.Name, loader.VaryingSizeFix)
		}
		return nil, nil
	}
	// sample's dtype and layout are bytes: a value past 255 would wrap.
	want := augment.Output{DType: sample.DType(o.Dtype), Layout: sample.Layout(o.Layout)}
	if int32(want.DType) != int32(o.Dtype) || int32(want.Layout) != int32(o.Layout) {
		return nil, fmt.Errorf("unknown dtype %d or layout %d", o.Dtype, o.Layout)
	}
	if want.DType == 0 {
		want.DType = sample.U8
	}
	if want.Layout == 0 {
		want.Layout = sample.HWC
	}
	return augment.NewPipelineAs(d.Source.Spec(), nil, want, false)
}

// getError maps a sample's read error to its status, as a stream's fail
// does: DATA_LOSS naming the file and record, INTERNAL for a source that
// broke its contract; a status already made (the budget, the byte bound)
// as it is.
func (s *Server) getError(d *Dataset, i int64, err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	msg := fmt.Sprintf("loaderd: GetSamples of %q: sample %d: %s", d.Name, i, strings.TrimPrefix(err.Error(), "loader: "))
	if errors.Is(err, loader.ErrIndex) || errors.Is(err, loader.ErrClosed) {
		s.log.Error("GetSamples failed", "dataset", d.Name, "index", i, "err", err)
		return status.Error(codes.Internal, msg)
	}
	s.log.Error("sample failed", "dataset", d.Name, "index", i, "err", err)
	return status.Error(codes.DataLoss, msg)
}

// paramsMessage lays out the draws of pipe's samples as loader.proto's
// AugmentParams says: a Batch's, and GetSamples'.
func paramsMessage(pipe *augment.Pipeline, ps []sample.Params) *pb.AugmentParams {
	pr := &pb.AugmentParams{Top: make([]int32, len(ps)), Left: make([]int32, len(ps)), Flip: make([]bool, len(ps))}
	for i, x := range ps {
		pr.Top[i], pr.Left[i], pr.Flip[i] = x.Top, x.Left, x.Flip
	}
	if pipe.Resamples() { // the box, as loader.proto's AugmentParams says
		pr.Height, pr.Width = make([]int32, len(ps)), make([]int32, len(ps))
		for i, x := range ps {
			pr.Top[i], pr.Left[i], pr.Height[i], pr.Width[i] = x.Box.Y, x.Box.X, x.Box.H, x.Box.W
		}
	}
	if pipe.Photometric() {
		photoParams(pr, ps)
	}
	if pipe.Erases() {
		eraseParams(pr, ps)
	}
	return pr
}
