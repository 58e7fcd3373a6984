package trainer_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loaderd/loaderd/client"
	"github.com/loaderd/loaderd/client/clienttest"
	"github.com/loaderd/loaderd/sampler"
	"github.com/loaderd/loaderd/trainer"
	"github.com/loaderd/loaderd/trainer/nn"
)

// startDaemon serves synthetic datasets "train" (n samples) and "val"
// (another seed: the same classes, different images) on a loopback port.
func startDaemon(t testing.TB, n, nval int64) *client.Client {
	t.Helper()
	addr := clienttest.Start(t, "--workers", "2",
		"--dataset", fmt.Sprintf("train=synthetic:%d", n), "--dataset", fmt.Sprintf("val=synthetic:%d?seed=7", nval)).Addr
	c, err := client.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// tinyCNN keeps the BatchNorm and residual structure at a size CI trains in
// a second.
var tinyCNN = nn.CNNConfig{Widths: []int{4, 8}, Blocks: []int{1, 1}, Classes: 10}

// TestTrainLearns trains the MLP for 160 steps (20 under the race
// detector) on synthetic data with DataParallel and with DDP over two CPU
// devices; the loss must fall and held-out accuracy must beat chance (10%)
// by far.
func TestTrainLearns(t *testing.T) {
	n, steps := int64(2560), int64(160)
	if raceEnabled {
		n, steps = 320, 20
	}
	c := startDaemon(t, n, 1000)
	for _, mode := range []string{"dp", "ddp"} {
		t.Run(mode, func(t *testing.T) {
			var progress bytes.Buffer
			cfg := trainer.TrainConfig{Dataset: "train", Eval: "val", Model: "mlp", Mode: mode, Devices: 2,
				Goroutines: 1, Batch: 32, Epochs: 2, LR: 0.02, Momentum: 0.9, Nesterov: true, WeightDecay: 5e-4,
				Seed: 1, Progress: &progress, Interval: time.Millisecond,
				SharedMemory: mode == "ddp"} // both transports
			cfg.EnsureDefaults()
			t0 := time.Now()
			res, err := trainer.Train(context.Background(), c, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d steps in %v; epochs %+v %+v", mode, res.Steps, time.Since(t0).Round(time.Millisecond),
				res.Epochs[0], *res.Epochs[1].Eval)
			if !res.Done || res.Steps != steps || res.TotalSteps != steps || len(res.Epochs) != 2 {
				t.Fatalf("done %v, %d of %d steps, %d epochs", res.Done, res.Steps, res.TotalSteps, len(res.Epochs))
			}
			first, last := res.Epochs[0], res.Epochs[1]
			if !(last.Loss < first.Loss) || last.Loss > 0.5*math.Log(10) {
				t.Errorf("training loss %.3f then %.3f: want it falling below %.3f", first.Loss, last.Loss, 0.5*math.Log(10))
			}
			if ev := res.Final(); ev == nil || ev.Accuracy < 0.6 || ev.Images != 1000 {
				t.Errorf("held-out evaluation %+v: want accuracy ≥ 0.6 on 1000 images", ev)
			}
			out := progress.String()
			for _, want := range []string{"\repoch 1/2  step ", "images/s", "data wait", "epoch 2/2: train loss", "eval loss"} {
				if !strings.Contains(out, want) {
					t.Errorf("progress output lacks %q:\n%s", want, out)
				}
			}
			if res.WaitShare < 0 || res.WaitShare > 1 || res.ImagesPerSec <= 0 {
				t.Errorf("wait share %g, %g images/s", res.WaitShare, res.ImagesPerSec)
			}
		})
	}
}

// resumeConfig trains the tiny CNN: 12 steps per epoch, 2 epochs,
// evaluated after each, a checkpoint every 5 steps.
func resumeConfig(mode, ckpt string) trainer.TrainConfig {
	cfg := trainer.TrainConfig{Dataset: "train", Eval: "val", Model: "cnn", CNN: tinyCNN, Mode: mode, Devices: 2,
		Goroutines: 1, Batch: 16, EvalBatch: 32, Epochs: 2, LR: 0.2, Momentum: 0.9, Nesterov: true,
		WeightDecay: 5e-4, LabelSmoothing: 0.1, Seed: 5, Checkpoint: ckpt, CheckpointEvery: 5}
	cfg.EnsureDefaults()
	return cfg
}

// cancelAfter is a progress writer that cancels a context on its n-th
// live-line update, so training stops after exactly n steps.
type cancelAfter struct {
	n      int
	cancel context.CancelFunc
}

func (w *cancelAfter) Write(p []byte) (int, error) {
	if bytes.HasPrefix(p, []byte("\repoch")) {
		if w.n--; w.n == 0 {
			w.cancel()
		}
	}
	return len(p), nil
}

// TestResumeMatchesUninterrupted stops runs part-way (at a step limit
// mid-epoch, at an epoch's end, and by cancelling the context), resumes
// them from their checkpoints, and requires the final parameters, BatchNorm
// running statistics, optimizer momentum and per-epoch statistics to be
// bit-identical to a run that was never stopped.
func TestResumeMatchesUninterrupted(t *testing.T) {
	c := startDaemon(t, 192, 64)
	for _, mode := range []string{"dp", "ddp"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			whole := filepath.Join(dir, "whole.ckpt")
			res, err := trainer.Train(context.Background(), c, resumeConfig(mode, whole))
			if err != nil || !res.Done || res.Steps != 24 {
				t.Fatalf("uninterrupted run: %+v, %v", res, err)
			}
			want, err := trainer.ReadCheckpoint(whole)
			if err != nil {
				t.Fatal(err)
			}
			type stop struct {
				name     string
				maxSteps int64
				cancelAt int
			}
			stops := []stop{
				{"max-steps-mid-epoch", 7, 0},
				{"max-steps-epoch-end", 12, 0},
				{"cancelled", 0, 17},
				{"cancelled-before-eval", 0, 12}, // the checkpoint keeps the epoch's evaluation pending
			}
			if raceEnabled {
				stops = stops[2:3]
			}
			for _, tc := range stops {
				t.Run(tc.name, func(t *testing.T) {
					path := filepath.Join(dir, tc.name+".ckpt")
					cfg := resumeConfig(mode, path)
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					cfg.MaxSteps = tc.maxSteps
					if tc.cancelAt > 0 {
						cfg.Progress, cfg.Interval = &cancelAfter{n: tc.cancelAt, cancel: cancel}, time.Nanosecond
					}
					res, err := trainer.Train(ctx, c, cfg)
					stopAt := tc.maxSteps + int64(tc.cancelAt)
					if tc.cancelAt > 0 && !errors.Is(err, trainer.ErrStopped) || tc.cancelAt == 0 && err != nil {
						t.Fatalf("first part: %v", err)
					}
					if res.Done || res.Steps != stopAt {
						t.Fatalf("first part stopped after %d steps (done %v), want %d", res.Steps, res.Done, stopAt)
					}
					part, err := trainer.ReadCheckpoint(path)
					if err != nil || part.Meta.Steps != stopAt || part.Meta.Position.Epoch*12+part.Meta.Position.Batch != stopAt {
						t.Fatalf("checkpoint after the stop: %+v, %v", part, err)
					}
					res, err = trainer.Train(context.Background(), c, resumeConfig(mode, path))
					if err != nil || !res.Done || res.Steps != 24 || res.Start != part.Meta.Position {
						t.Fatalf("resumed run: %+v, %v", res, err)
					}
					got, err := trainer.ReadCheckpoint(path)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got.Model, want.Model) {
						t.Error("parameters or running statistics differ from the uninterrupted run")
					}
					if !bytes.Equal(got.Optimizer, want.Optimizer) {
						t.Error("optimizer state differs from the uninterrupted run")
					}
					for i, e := range want.Meta.Epochs {
						g := got.Meta.Epochs[i]
						if g.Loss != e.Loss || g.Accuracy != e.Accuracy || *g.Eval != *withSeconds(e.Eval, g.Eval.Seconds) {
							t.Errorf("epoch %d: %+v %+v, want %+v %+v", i, g, *g.Eval, e, *e.Eval)
						}
					}
				})
			}
		})
	}
}

func withSeconds(e *trainer.EvalResult, s float64) *trainer.EvalResult {
	c := *e
	c.Seconds = s
	return &c
}

// TestResumeRefusesOtherRun checks that a checkpoint is not applied to a
// run with another configuration, and that every difference is named.
func TestResumeRefusesOtherRun(t *testing.T) {
	c := startDaemon(t, 192, 64)
	path := filepath.Join(t.TempDir(), "a.ckpt")
	cfg := resumeConfig("dp", path)
	cfg.MaxSteps = 2
	if _, err := trainer.Train(context.Background(), c, cfg); err != nil {
		t.Fatal(err)
	}
	other := resumeConfig("dp", path)
	other.Batch, other.Seed = 32, 6
	_, err := trainer.Train(context.Background(), c, other)
	if !errors.Is(err, trainer.ErrCheckpoint) || !strings.Contains(err.Error(), "batch: checkpoint 16, now 32") ||
		!strings.Contains(err.Error(), "seed: checkpoint 5, now 6") {
		t.Errorf("err = %v", err)
	}
}

// TestResumeBesideTornTemp: a run killed while writing its checkpoint
// left a torn PATH.tmpNNN beside the last good checkpoint; the next run
// resumes from that checkpoint and removes the torn file.
func TestResumeBesideTornTemp(t *testing.T) {
	c := startDaemon(t, 192, 64)
	path := filepath.Join(t.TempDir(), "a.ckpt")
	cfg := resumeConfig("dp", path)
	cfg.MaxSteps = 2
	if _, err := trainer.Train(context.Background(), c, cfg); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	torn := path + ".tmp4242"
	if err := os.WriteFile(torn, good[:len(good)/3], 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.MaxSteps = 3
	res, err := trainer.Train(context.Background(), c, cfg)
	if err != nil || res.Start != (sampler.Position{Batch: 2}) {
		t.Fatalf("resumed run: %+v, %v; want a start at epoch 0 batch 2", res, err)
	}
	if _, err := os.Stat(torn); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the torn temporary file is still there (%v)", err)
	}
}

// TestBadAugmentBeforeTraining: the daemon parses augmentation specs, so a
// bad one comes back as the daemon's error when Train starts, before any
// step, for the evaluation's spec as for the training's.
func TestBadAugmentBeforeTraining(t *testing.T) {
	c := startDaemon(t, 64, 32)
	for _, tt := range []struct {
		name       string
		set        func(*trainer.TrainConfig)
		want, spec string
	}{
		{"train", func(cfg *trainer.TrainConfig) { cfg.Augment = "crop=x" }, "", "crop=x"},
		{"eval", func(cfg *trainer.TrainConfig) { cfg.EvalAugment = "blur" }, "eval dataset \"val\"", "blur"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := trainer.TrainConfig{Dataset: "train", Eval: "val", Model: "mlp", Devices: 1, Batch: 16, Epochs: 1,
				Momentum: 0.9}
			tt.set(&cfg)
			cfg.EnsureDefaults()
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			res, err := trainer.Train(context.Background(), c, cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), tt.spec) {
				t.Fatalf("Train with a bad %s augment: %v", tt.name, err)
			}
			if res != nil && res.Steps != 0 {
				t.Fatalf("%d steps trained before the bad %s augment was reported", res.Steps, tt.name)
			}
		})
	}
}
