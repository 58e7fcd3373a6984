package trainer_test

import (
	"bytes"
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/loaderd/loaderd/trainer"
)

// TestTrainAMP trains the MLP on synthetic data in f32, bf16 and fp16
// (fp16 alone, on less data, under the race detector): each converges,
// and fp16 reports its loss scale.
func TestTrainAMP(t *testing.T) {
	n, modes := int64(1280), []string{"off", "bf16", "fp16"}
	if raceEnabled {
		n, modes = 320, modes[2:]
	}
	c := startDaemon(t, n, 500)
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			cfg := trainer.TrainConfig{Dataset: "train", Eval: "val", Model: "mlp", Devices: 1, Goroutines: 1,
				Batch: 32, Epochs: 2, LR: 0.02, Momentum: 0.9, Nesterov: true, Seed: 1, AMP: mode}
			cfg.EnsureDefaults()
			res, err := trainer.Train(context.Background(), c, cfg)
			if err != nil {
				t.Fatal(err)
			}
			first, last := res.Epochs[0], res.Epochs[1]
			t.Logf("%s: loss %.3f → %.3f, eval %+v, %d skipped, scale %g", mode, first.Loss, last.Loss,
				*res.Final(), res.SkippedSteps, res.LossScale)
			if res.AMP != mode {
				t.Errorf("result says amp %q", res.AMP)
			}
			if !(last.Loss < first.Loss) || last.Loss > 0.5*math.Log(10) {
				t.Errorf("training loss %.3f then %.3f: want it falling below %.3f", first.Loss, last.Loss, 0.5*math.Log(10))
			}
			if ev := res.Final(); ev == nil || ev.Accuracy < 0.6 {
				t.Errorf("held-out evaluation %+v: want accuracy ≥ 0.6", ev)
			}
			if (mode == "fp16") != (res.LossScale > 0) || res.SkippedSteps >= res.Steps/2 {
				t.Errorf("%s: loss scale %g, %d of %d steps skipped", mode, res.LossScale, res.SkippedSteps, res.Steps)
			}
		})
	}
}

// An fp16 run stopped part-way and resumed ends with the same weights,
// optimizer state and loss-scaler state (scale and growth tracker) as one
// never stopped: the checkpoint carries the scaler.
func TestResumeKeepsScaler(t *testing.T) {
	c := startDaemon(t, 96, 32) // 6 steps an epoch, 12 in all
	dir := t.TempDir()
	run := func(ckpt string, maxSteps int64) *trainer.Checkpoint {
		t.Helper()
		cfg := resumeConfig("dp", filepath.Join(dir, ckpt))
		cfg.AMP, cfg.MaxSteps = "fp16", maxSteps
		if _, err := trainer.Train(context.Background(), c, cfg); err != nil {
			t.Fatal(err)
		}
		ck, err := trainer.ReadCheckpoint(cfg.Checkpoint)
		if err != nil {
			t.Fatal(err)
		}
		return ck
	}
	whole := run("whole.ckpt", 0)
	part := run("part.ckpt", 5)
	if part.Meta.Scaler == nil || part.Meta.Steps != 5 || part.Meta.Scaler.Tracker == 0 {
		t.Fatalf("part-way checkpoint: %d steps, scaler %+v", part.Meta.Steps, part.Meta.Scaler)
	}
	resumed := run("part.ckpt", 0)
	t.Logf("scaler after 5 steps %+v, at the end %+v (uninterrupted %+v)", *part.Meta.Scaler, *resumed.Meta.Scaler, *whole.Meta.Scaler)
	if *resumed.Meta.Scaler != *whole.Meta.Scaler {
		t.Errorf("resumed scaler %+v, uninterrupted %+v", *resumed.Meta.Scaler, *whole.Meta.Scaler)
	}
	if !bytes.Equal(resumed.Model, whole.Model) || !bytes.Equal(resumed.Optimizer, whole.Optimizer) {
		t.Error("resumed fp16 run's weights or optimizer differ from the uninterrupted run's")
	}
}
