package server

import (
	"fmt"
	"runtime"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/client/wire"
	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/pinned"
	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
	"github.com/loaderd/loaderd/sampler"
)

// plan is a validated Open: everything a stream needs before it starts.
type plan struct {
	ds       *Dataset
	pipe     *augment.Pipeline
	cfg      loader.Config
	shm      bool
	lane     bool // Open.shm_lane on a shared-memory stream
	inFlight int
	full     *augment.Pipeline // Open.values_on_client: the chain whose value ops pipe leaves to the client
}

// validate checks o and reports every problem at once, as InvalidArgument
// (NotFound for an unknown dataset; Unimplemented for the shared-memory
// transport on a platform without it, see pinned.SharedSupported).
func (s *Server) validate(o *pb.Open) (*plan, error) {
	var long []string
	for _, f := range []struct {
		name  string
		value string
		max   int
	}{{"dataset", o.GetDataset(), wire.MaxNameLen}, {"client_name", o.GetClientName(), wire.MaxNameLen}, {"augment", o.GetAugment(), wire.MaxAugmentLen}} {
		if len(f.value) > f.max {
			long = append(long, fmt.Sprintf("%s of %d bytes, over the %d-byte limit", f.name, len(f.value), f.max))
		}
	}
	if len(long) > 0 {
		return nil, status.Errorf(codes.InvalidArgument, "loaderd: invalid Open: %s", strings.Join(long, "; "))
	}
	ds, ok := s.datasets[o.GetDataset()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "loaderd: unknown dataset %q (registered: %s)", o.GetDataset(), strings.Join(s.names(), ", "))
	}
	var bad []string
	world := int(o.GetWorld())
	if world == 0 {
		world = 1
	}
	if world < 0 || o.GetRank() < 0 || int(o.GetRank()) >= world {
		bad = append(bad, fmt.Sprintf("rank %d of world %d", o.GetRank(), o.GetWorld()))
	}
	bs := int(o.GetBatchSize())
	if err := loader.CheckBatchSize(bs); err != nil {
		bad = append(bad, err.Error())
	}
	if o.GetStartEpoch() < 0 || o.GetStartBatch() < 0 || o.GetEpochs() < 0 {
		bad = append(bad, fmt.Sprintf("negative start epoch, start batch or epochs (%d, %d, %d)", o.GetStartEpoch(), o.GetStartBatch(), o.GetEpochs()))
	}
	if n := epochSamples(ds.Source); o.GetStartOffset() < 0 || o.GetStartOffset() > n {
		bad = append(bad, fmt.Sprintf("start offset %d (want 0..%d, the entries of an epoch)", o.GetStartOffset(), n))
	}
	inFlight := int(o.GetMaxInFlight())
	if inFlight == 0 {
		inFlight = wire.DefaultInFlight
	}
	if inFlight > wire.MaxInFlight {
		bad = append(bad, fmt.Sprintf("max in flight %d (want 1..%d)", inFlight, wire.MaxInFlight))
	}
	if _, ok := pb.Transport_name[int32(o.GetTransport())]; !ok {
		bad = append(bad, fmt.Sprintf("unknown transport %d", o.GetTransport()))
	}
	pipe, err := buildPipeline(ds, o)
	var full *augment.Pipeline
	if err == nil && o.GetValuesOnClient() {
		// Send the pixels; the header's table does the rest.
		full = pipe
		if pipe, err = full.PixelPipeline(); err != nil {
			err = fmt.Errorf("values_on_client: %w", err)
		}
	}
	if err != nil {
		bad = append(bad, strings.TrimPrefix(err.Error(), "augment: "))
	}
	if pipe != nil && pipe.Mixer() != nil && len(ds.Source.Classes()) == 0 {
		bad = append(bad, fmt.Sprintf("mixup and cutmix make soft labels over the dataset's classes, and dataset %q names none", ds.Name))
	}
	shm := o.GetTransport() == pb.Transport_TRANSPORT_SHM
	if pipe != nil && bs > 0 && !shm && int64(bs)*int64(pipe.Out().Bytes()) > wire.MaxBatchBytes {
		bad = append(bad, fmt.Sprintf("a batch of %d is %d bytes, over the %d-byte inline limit (use shared memory)",
			bs, int64(bs)*int64(pipe.Out().Bytes()), wire.MaxBatchBytes))
	}
	if len(bad) > 0 {
		return nil, status.Errorf(codes.InvalidArgument, "loaderd: invalid Open: %s", strings.Join(bad, "; "))
	}
	if shm && !pinned.SharedSupported {
		return nil, status.Errorf(codes.Unimplemented, "loaderd: shared-memory transport not supported on %s: open the stream with the inline transport", runtime.GOOS)
	}
	cfg := loader.Config{
		Source: ds.Source, Pipeline: pipe,
		Rank: int(o.GetRank()), World: world, Seed: o.GetSeed(), Shuffle: !o.GetNoShuffle(), DropLast: o.GetDropLast(),
		BatchSize: bs, DropLastBatch: o.GetDropLastBatch(),
		Start:    sampler.Position{Epoch: o.GetStartEpoch(), Batch: o.GetStartBatch(), Offset: o.GetStartOffset()},
		InFlight: inFlight, WithParams: o.GetIncludeParams(),
		OnError: s.opts.OnError, MaxSkips: s.opts.MaxSkips, OnDemand: o.GetOnDemand(),
	}
	if shm {
		// The client holds up to a window of slots; more let the workers
		// fill ahead meanwhile.
		cfg.InFlight = inFlight + wire.ShmExtraSlots
	}
	if o.GetEpochs() > 0 {
		cfg.Epochs = o.GetStartEpoch() + o.GetEpochs()
	}
	return &plan{ds: ds, pipe: pipe, cfg: cfg, shm: shm, lane: shm && o.GetShmLane(), inFlight: inFlight, full: full}, nil
}

// buildPipeline folds the stream's augmentation: the dataset default when
// Open names none, with Open's dtype and layout (augment.NewPipelineAs).
func buildPipeline(ds *Dataset, o *pb.Open) (*augment.Pipeline, error) {
	spec := o.GetAugment()
	if spec == "" {
		spec = ds.Augment
	}
	ops, err := augment.ParseOps(spec)
	if err != nil {
		return nil, err
	}
	if in := ds.Source.Spec(); in.H == 0 && in.W == 0 && !opensWithResample(ops) {
		// Said here, before NewPipelineAs refuses the 0×0 input in its
		// own terms, with what to do about it.
		return nil, fmt.Errorf("dataset %q has images of varying size (size=any, or without size= when its first images differ) "+
			"and augment %q takes one size: %s", ds.Name, spec, loader.VaryingSizeFix)
	}
	// sample's dtype and layout are bytes: a value past 255 would wrap.
	want := augment.Output{DType: sample.DType(o.GetDtype()), Layout: sample.Layout(o.GetLayout())}
	if int32(want.DType) != int32(o.GetDtype()) {
		return nil, fmt.Errorf("unknown dtype %d", o.GetDtype())
	}
	if int32(want.Layout) != int32(o.GetLayout()) {
		return nil, fmt.Errorf("unknown layout %d", o.GetLayout())
	}
	return augment.NewPipelineAs(ds.Source.Spec(), ops, want, o.GetAugment() != "")
}

func (s *Server) names() []string {
	var n []string
	for k := range s.datasets {
		n = append(n, k)
	}
	return n
}

// header describes the stream to the client before its first batch.
func header(p *plan, l *loader.Loader, tr transport) *pb.StreamHeader {
	out := p.pipe.Out()
	h := &pb.StreamHeader{
		DatasetSize:     p.ds.Source.Len(),
		EpochSamples:    l.Sampler().EpochLen(),
		SamplesPerEpoch: l.Sampler().NumSamples(),
		BatchesPerEpoch: l.BatchesPerEpoch(),
		BatchSize:       int32(p.cfg.BatchSize),
		Dtype:           pb.DType(out.DType),
		Layout:          pb.Layout(out.Layout),
		SampleBytes:     int64(out.Bytes()),
		Augment:         augment.FormatOps(p.pipe.Ops()),
		MaxInFlight:     uint32(p.inFlight),
		StartEpoch:      p.cfg.Start.Epoch,
		StartBatch:      p.cfg.Start.Batch,
		StartOffset:     p.cfg.Start.Offset,
		OnDemand:        p.cfg.OnDemand,
		NumClasses:      int32(len(p.ds.Source.Classes())),
		BatchMix:        p.pipe.Mixer() != nil,
	}
	for _, d := range out.Shape() {
		h.SampleShape = append(h.SampleShape, int64(d))
	}
	if p.full != nil { // the chain in effect, and its value ops as the table
		h.Augment = augment.FormatOps(p.full.Ops())
		var dt sample.DType
		h.ValueTable, dt = p.full.ValueTable()
		h.ValueDtype = pb.DType(dt)
	}
	h.Fingerprint = p.ds.fingerprintWait()
	headerFields(h, p.ds.Source)
	tr.describe(h)
	return h
}

// opensWithResample reports whether ops open with a geometric op
// (resize, center_crop, random_resized_crop), the chains that take
// images of any size.
func opensWithResample(ops []augment.Op) bool {
	if len(ops) == 0 {
		return false
	}
	switch ops[0].(type) {
	case augment.Resize, augment.CenterCrop, augment.RandomResizedCrop,
		*augment.Resize, *augment.CenterCrop, *augment.RandomResizedCrop:
		return true
	}
	return false
}

// epochSamples is the length of an epoch's list for src's streams: the
// weighted sampler's draws (samples=K) where it has one, else its size.
func epochSamples(src loader.Source) int64 {
	if w := loader.WeightsOf(src); w != nil {
		return w.Samples()
	}
	return src.Len()
}
