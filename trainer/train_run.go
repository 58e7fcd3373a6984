package trainer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/loaderd/loaderd/client"
	"github.com/loaderd/loaderd/sampler"
	"github.com/loaderd/loaderd/trainer/optim"
	"github.com/loaderd/loaderd/trainer/parallel"
	"github.com/loaderd/loaderd/trainer/tensor"
)

// ErrStopped reports a run stopped by its context before the last epoch;
// its checkpoint (if configured) holds where to resume.
var ErrStopped = errors.New("trainer: training stopped")

// Train trains cfg.Model on batches streamed from c, evaluating cfg.Eval
// after every epoch. It resumes from cfg.Checkpoint when that file exists.
// When ctx ends it saves a checkpoint at the last finished step and
// returns the result so far with an error matching ErrStopped and the
// context's error. cfg must have passed Validate.
func Train(ctx context.Context, c *client.Client, cfg TrainConfig) (*TrainResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	t := &training{cfg: &cfg, c: c, res: &TrainResult{Model: cfg.Model, Mode: cfg.Mode, Device: cfg.Device, Devices: cfg.Devices, AMP: cfg.AMP, TF32: cfg.TF32,
		Checkpoint: cfg.Checkpoint, Epochs: []EpochResult{}}}
	if cfg.Group != nil {
		t.res.Devices = cfg.Group.Size() // one per process
	}
	if err := pickBatch(&cfg, t.res); err != nil {
		return nil, err
	}
	var ck *Checkpoint
	if cfg.Checkpoint != "" {
		if t.leader() { // the writer: what a crash of its last run left
			removeStaleTemps(cfg.Checkpoint)
		}
		var err error
		ck, err = ReadCheckpoint(cfg.Checkpoint)
		switch {
		case errors.Is(err, os.ErrNotExist):
			ck = nil
		case err != nil:
			return nil, err
		default:
			if d := ck.Meta.Fingerprint.diff(cfg.fingerprint()); len(d) > 0 {
				return nil, fmt.Errorf("%w %s was written by a different run (delete it, or use another path):\n  %s",
					ErrCheckpoint, cfg.Checkpoint, joinLines(d))
			}
			t.pos, t.steps, t.epoch = ck.Meta.Position, ck.Meta.Steps, ck.Meta.Epoch
			t.res.Epochs = append(t.res.Epochs, ck.Meta.Epochs...)
		}
	}
	n, err := checkDatasets(ctx, c, &cfg)
	if err != nil {
		return nil, err
	}
	t.dist, t.rbs = sampler.Distributed{N: n, World: cfg.world()}, cfg.Batch/cfg.world()
	if ck != nil {
		if t.pos, err = resumePoint(ck, cfg.world(), n); err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.Checkpoint, err)
		}
	}
	t.res.Start = t.pos
	g := cfg.Goroutines
	if g == 0 {
		_, g = tensor.PlanCPU(cfg.Devices, 0)
	}
	devs, err := openDevices(&cfg, g)
	if err != nil {
		return nil, err
	}
	defer closeDevices(devs)
	t.devs = devs
	if t.e, err = newEngine(&cfg, devs); err != nil {
		return nil, err
	}
	defer t.e.close()
	if cfg.Group != nil {
		if err := agreeResume(&cfg, devs[0], ck); err != nil {
			return nil, err
		}
	}
	if ck != nil {
		if err := t.e.restore(ck.Model, ck.Optimizer); err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.Checkpoint, err)
		}
		t.pending = ck.Meta.Pending
		if ss := ck.Meta.Scaler; ss != nil {
			for _, s := range t.e.scalers() {
				s.Scale = ss.Scale
				s.SetTracker(ss.Tracker)
			}
		}
	}
	t.res.Params = t.e.models()[0].NumParams()
	t.eval = newEvaluator(t.e.models())
	return t.res, t.loop(ctx)
}

// checkDatasets makes sure the daemon serves the datasets and that their
// labels fit the model's classes, and returns the training set's size.
func checkDatasets(ctx context.Context, c *client.Client, cfg *TrainConfig) (int64, error) {
	ds, err := c.Datasets(ctx)
	if err != nil {
		return 0, err
	}
	var size int64
	classes := 10
	if cfg.Model == "cnn" {
		classes = cfg.CNN.Classes
	}
	var errs []error
	for _, name := range []string{cfg.Dataset, cfg.Eval} {
		if name == "" {
			continue
		}
		var names []string
		found := false
		for _, d := range ds {
			names = append(names, d.GetName())
			if d.GetName() != name {
				continue
			}
			found = true
			if name == cfg.Dataset {
				size = d.GetSize()
			}
			if n := len(d.GetClasses()); n > classes {
				errs = append(errs, fmt.Errorf("dataset %q has %d classes; the %s has %d outputs", name, n, cfg.Model, classes))
			}
		}
		if !found {
			errs = append(errs, fmt.Errorf("the daemon serves no dataset %q (it serves %q)", name, names))
		}
	}
	if len(errs) == 0 && cfg.Eval != "" {
		// The daemon parses augmentation specs: opening the eval stream
		// now turns a bad --eval-augment into an error before training
		// rather than after the first epoch. (The training stream opens
		// next, so its spec is checked as early.)
		s, err := c.Open(ctx, evalStream(cfg))
		if err != nil {
			errs = append(errs, fmt.Errorf("eval dataset %q with augment %q: %w", cfg.Eval, cfg.EvalAugment, err))
		} else {
			s.Close()
		}
	}
	if len(errs) > 0 {
		return 0, fmt.Errorf("%w: %w", ErrTrainConfig, errors.Join(errs...))
	}
	return size, nil
}

// training is one call of Train.
type training struct {
	cfg   *TrainConfig
	devs  []tensor.Device
	c     *client.Client
	e     engine
	eval  *evaluator
	sched optim.Schedule
	bpe   int64
	res   *TrainResult
	dist  sampler.Distributed // this run's world over the training set
	rbs   int                 // per-rank batch

	pos      sampler.Position // next batch
	steps    int64
	epoch    meter        // the current epoch so far
	pending  *EpochResult // trained, not yet evaluated
	run      meter        // this process, for the summary
	lastP    time.Time
	tick     meter // since the last progress line
	lineOpen bool  // a live line awaits its newline
}

// schedule builds the learning-rate schedule over the whole run.
func schedule(c *TrainConfig, bpe int64) optim.Schedule {
	total := int(int64(c.Epochs) * bpe)
	warm := int(c.Warmup * float64(bpe))
	if c.Schedule == "cosine" {
		return optim.WarmupCosine{Base: c.LR, Final: 0, Warmup: warm, Total: total}
	}
	oc := optim.NewOneCycle(c.LR, total)
	if c.Warmup > 0 {
		oc.PctStart = c.Warmup / float64(c.Epochs)
	}
	// Momentum stays what the optimizer was given (cycle_momentum=False).
	oc.BaseMomentum, oc.MaxMomentum = c.Momentum, c.Momentum
	return oc
}

func (t *training) loop(ctx context.Context) error {
	cfg, started := t.cfg, time.Now()
	t.lastP = started
	defer func() {
		r := t.res
		r.Position, r.Steps = t.pos, t.steps
		r.Done = t.pos.Epoch >= int64(cfg.Epochs)
		r.Images, r.Seconds = t.run.N, time.Since(started).Seconds()
		r.ImagesPerSec = float64(t.run.N) / max(t.run.Seconds, 1e-9)
		r.WaitShare = t.run.Wait / max(t.run.Seconds, 1e-9)
		if s := t.e.scalers(); len(s) > 0 {
			r.LossScale = s[0].Scale
		}
		if t.lineOpen {
			fmt.Fprintln(cfg.Progress)
		}
	}()
	if t.pending != nil { // stopped while evaluating: finish that first
		if err := t.finishEpoch(ctx); err != nil {
			return err
		}
	}
	t.res.TotalSteps = t.steps
	if t.pos.Epoch >= int64(cfg.Epochs) {
		return nil
	}
	bpe, err := t.e.open(ctx, t.c, cfg, t.pos)
	if err != nil {
		return err
	}
	regs, note := registerRegions(t.e.openStreams(), t.devs)
	defer unregisterRegions(regs) // before Train's deferred close unmaps the regions
	t.res.HostRegister = note
	t.res.Kernels = kernelCode(t.devs)
	t.res.Convolutions = convEngine(t.devs)
	for _, s := range t.e.openStreams() {
		t.res.ValuesOnClient = s.ValuesOnClient()
	}
	if bpe < 1 {
		return fmt.Errorf("trainer: dataset %q has fewer samples per rank than a batch of %d: %w",
			cfg.Dataset, cfg.Batch/cfg.world(), ErrTrainConfig)
	}
	t.bpe, t.sched = bpe, schedule(cfg, bpe)
	t.res.TotalSteps = int64(cfg.Epochs) * bpe
	for t.pos.Epoch < int64(cfg.Epochs) {
		if cfg.MaxSteps > 0 && t.steps >= cfg.MaxSteps {
			return t.save()
		}
		if ctx.Err() != nil {
			return t.stop(ctx.Err())
		}
		t0 := time.Now()
		st, err := t.e.step(ctx, t.sched.LR(int(t.steps)))
		var fe *fetchError
		if errors.As(err, &fe) {
			if ctx.Err() != nil {
				return t.stop(ctx.Err())
			}
			if serr := t.save(); serr != nil {
				return errors.Join(err, serr)
			}
			return err
		}
		if err != nil {
			return err
		}
		if st.Skipped {
			t.res.SkippedSteps++
		}
		if st.pos != t.pos {
			return fmt.Errorf("trainer: stream gave %v, expected %v", st.pos, t.pos)
		}
		m := meter{LossSum: st.Loss * float64(st.N), Correct: int64(st.Correct), N: int64(st.N), Steps: 1,
			Seconds: time.Since(t0).Seconds(), Wait: st.wait.Seconds()}
		t.epoch.add(m)
		t.run.add(m)
		t.tick.add(m)
		t.steps++
		t.pos = t.pos.Next(t.batchesAt(t.pos))
		t.progress(false)
		if t.pos.Batch == 0 {
			if err := t.endEpoch(ctx); err != nil {
				return err
			}
		} else if cfg.CheckpointEvery > 0 && t.steps%int64(cfg.CheckpointEvery) == 0 {
			if err := t.save(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (m *meter) add(o meter) {
	m.LossSum += o.LossSum
	m.Correct += o.Correct
	m.N += o.N
	m.Steps += o.Steps
	m.Seconds += o.Seconds
	m.Wait += o.Wait
}

// stop saves where training stands and reports why it stopped.
func (t *training) stop(cause error) error {
	if err := t.save(); err != nil {
		return errors.Join(fmt.Errorf("%w at %v: %w", ErrStopped, t.pos, cause), err)
	}
	return fmt.Errorf("%w at %v: %w", ErrStopped, t.pos, cause)
}

func (t *training) endEpoch(ctx context.Context) error {
	m := t.epoch
	t.pending = &EpochResult{Epoch: t.pos.Epoch - 1, Steps: m.Steps, Loss: m.loss(), Accuracy: m.accuracy(),
		Seconds: m.Seconds, ImagesPerSec: float64(m.N) / max(m.Seconds, 1e-9), WaitShare: m.Wait / max(m.Seconds, 1e-9)}
	t.progress(true)
	t.epoch = meter{}
	return t.finishEpoch(ctx)
}

// finishEpoch evaluates the epoch just trained, records it and saves. If
// ctx ends during the evaluation, the checkpoint keeps the epoch pending
// and a resumed run evaluates it first.
func (t *training) finishEpoch(ctx context.Context) error {
	cfg, r := t.cfg, t.pending
	if cfg.Eval != "" && t.leader() { // the other ranks wait in their next collective
		ev, err := t.eval.run(ctx, t.c, cfg)
		if err != nil {
			if ctx.Err() != nil {
				return t.stop(ctx.Err())
			}
			return err
		}
		r.Eval = ev
	}
	t.res.Epochs = append(t.res.Epochs, *r)
	t.pending = nil
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "\n%s\n", epochLine(*r, cfg.Epochs))
		t.lineOpen = false
	}
	return t.save()
}

// save writes the checkpoint, if one is configured.
func (t *training) save() error {
	if t.cfg.Checkpoint == "" || !t.leader() {
		return nil
	}
	model, opt, err := t.e.state()
	if err != nil {
		return fmt.Errorf("trainer: checkpoint: %w", err)
	}
	g, err := t.dist.Global(t.pos, t.rbs, true)
	if err != nil {
		return fmt.Errorf("trainer: checkpoint: %w", err)
	}
	ck := Checkpoint{Model: model, Optimizer: opt, Meta: CheckpointMeta{Version: 1,
		Fingerprint: t.cfg.fingerprint(), Position: t.pos, Global: &g, Steps: t.steps, Epoch: t.epoch,
		Epochs: t.res.Epochs, Pending: t.pending, Saved: time.Now().UTC()}}
	if s := t.e.scalers(); len(s) > 0 {
		ck.Meta.Scaler = &ScalerState{Scale: s[0].Scale, Tracker: s[0].Tracker()}
	}
	return ck.WriteFile(t.cfg.Checkpoint)
}

// leader reports whether this process evaluates and writes checkpoints:
// always, unless it is a rank other than 0 of a Group.
func (t *training) leader() bool { return t.cfg.Group == nil || t.cfg.Group.Rank() == 0 }

// agreeResume makes sure every rank of a Group resumes from the same
// point: rank 0 broadcasts what it read, and if any rank read something
// else (no checkpoint, an older one: not the same file), all fail, saying so.
func agreeResume(cfg *TrainConfig, dev tensor.Device, ck *Checkpoint) (err error) {
	g := cfg.Group
	v := make([]float32, 8)
	if ck != nil { // exact in f32: 24-bit pieces
		s, p, m := ck.Meta.Steps, ck.Meta.Position, int64(1<<24-1)
		v = []float32{1, float32(s >> 24), float32(s & m), float32(p.Epoch), float32(p.Batch),
			float32(p.Offset >> 48), float32(p.Offset >> 24 & m), float32(p.Offset & m)}
	}
	b, err := dev.Alloc(tensor.F32, len(v))
	if err != nil {
		return fmt.Errorf("trainer: %w", err)
	}
	defer dev.Free(b)
	r0 := make([]float32, len(v))
	bad := []float32{0}
	if err = dev.CopyIn(b, v); err == nil {
		if err = g.Broadcast(b, 0); err == nil {
			err = dev.CopyOut(r0, b)
		}
	}
	if err != nil {
		return fmt.Errorf("trainer: rank %d: resume point: %w", g.Rank(), err)
	}
	if !slices.Equal(r0, v) {
		bad[0] = 1
	}
	flag := b.Slice(0, 1)
	if err = dev.CopyIn(flag, bad); err == nil {
		if err = g.AllReduce(flag, parallel.Sum); err == nil {
			err = dev.CopyOut(bad, flag)
		}
	}
	if err != nil {
		return fmt.Errorf("trainer: rank %d: resume point: %w", g.Rank(), err)
	}
	if bad[0] == 0 {
		return nil
	}
	desc := func(v []float32) string {
		if v[0] == 0 {
			return "no checkpoint"
		}
		return fmt.Sprintf("a checkpoint at step %d", int64(v[1])<<24+int64(v[2]))
	}
	return fmt.Errorf("%w %s: %d rank(s) disagree with rank 0, which read %s; rank %d read %s: "+
		"every rank must read the same file (a shared file system across nodes)",
		ErrCheckpoint, cfg.Checkpoint, int(bad[0]), desc(r0), g.Rank(), desc(v))
}

func joinLines(s []string) string {
	out := ""
	for i, l := range s {
		if i > 0 {
			out += "\n  "
		}
		out += l
	}
	return out
}

// progress rewrites the live line at most every Interval (or now).
func (t *training) progress(now bool) {
	cfg := t.cfg
	if cfg.Progress == nil || (!now && time.Since(t.lastP) < cfg.Interval) {
		return
	}
	m, e := t.tick, t.epoch
	if m.Steps == 0 {
		return
	}
	batch := t.pos.Batch
	if batch == 0 {
		batch = t.bpe
	}
	fmt.Fprintf(cfg.Progress, "\repoch %d/%d  step %d/%d  %6.0f images/s  loss %.3f  acc %5.1f%%  data wait %4.1f%%  lr %.4f ",
		t.epochShown(), cfg.Epochs, batch, t.bpe, float64(m.N)/max(m.Seconds, 1e-9), e.loss(), 100*e.accuracy(),
		100*m.Wait/max(m.Seconds, 1e-9), t.sched.LR(int(t.steps)))
	t.tick, t.lastP, t.lineOpen = meter{}, time.Now(), true
}

// epochShown is the 1-based epoch of the last step taken.
func (t *training) epochShown() int64 {
	if t.pos.Batch == 0 {
		return t.pos.Epoch
	}
	return t.pos.Epoch + 1
}

func epochLine(r EpochResult, epochs int) string {
	s := fmt.Sprintf("epoch %d/%d: train loss %.4f acc %.2f%%  %.0f images/s  data wait %.1f%%  %s",
		r.Epoch+1, epochs, r.Loss, 100*r.Accuracy, r.ImagesPerSec, 100*r.WaitShare,
		time.Duration(r.Seconds*float64(time.Second)).Round(time.Second))
	if r.Eval != nil {
		s += fmt.Sprintf("  |  eval loss %.4f acc %.2f%% (%d images, %.1fs)", r.Eval.Loss, 100*r.Eval.Accuracy,
			r.Eval.Images, r.Eval.Seconds)
	}
	return s
}

// batchesAt returns the batches each rank trains on in p's epoch from
// p.Offset: bpe, but in an epoch resumed under another world.
func (t *training) batchesAt(p sampler.Position) int64 {
	if p.Offset == 0 {
		return t.bpe
	}
	return t.dist.BatchesFrom(p.Offset, t.rbs, true)
}

// resumePoint returns where a run of world ranks over n samples resumes
// from ck: the checkpoint's Position under its own world, else the global
// position (the epoch and how much of its order was consumed), which the
// new world splits afresh (docs/RESUME.md).
func resumePoint(ck *Checkpoint, world int, n int64) (sampler.Position, error) {
	f := ck.Meta.Fingerprint
	if f.World == world {
		return ck.Meta.Position, nil
	}
	if ck.Meta.Global != nil {
		return *ck.Meta.Global, nil
	}
	if f.World < 1 || f.Batch%f.World != 0 {
		return sampler.Position{}, fmt.Errorf("%w: world %d with batch %d", ErrCheckpoint, f.World, f.Batch)
	}
	g, err := sampler.Distributed{N: n, World: f.World}.Global(ck.Meta.Position, f.Batch/f.World, true)
	if err != nil {
		return sampler.Position{}, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	return g, nil
}
