package trainer

import (
	"errors"
	"strings"
	"testing"

	"github.com/loaderd/loaderd/trainer/nn"
)

func validConfig() TrainConfig {
	c := TrainConfig{Devices: 2, Momentum: 0.9, Nesterov: true}
	c.EnsureDefaults()
	return c
}

func TestTrainConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		edit func(*TrainConfig)
		want []string // every problem named; none for a valid config
	}{
		{"defaults", func(*TrainConfig) {}, nil},
		{"ddp", func(c *TrainConfig) { c.Mode, c.Devices, c.Batch = "ddp", 4, 256 }, nil},
		{"model", func(c *TrainConfig) { c.Model = "resnet50" }, []string{`model "resnet50": want mlp or cnn`}},
		{"cnn shape", func(c *TrainConfig) { c.CNN = nn.CNNConfig{Widths: []int{8}, Classes: 10} }, []string{"cnn shape"}},
		{"mode", func(c *TrainConfig) { c.Mode = "fsdp" }, []string{`mode "fsdp": want dp or ddp`}},
		{"devices", func(c *TrainConfig) { c.Devices = 0 }, []string{"devices 0: want 1..256"}},
		{"batch below devices", func(c *TrainConfig) { c.Devices, c.Batch = 4, 3 }, []string{"batch 3: want at least one sample per device (4)"}},
		{"ddp uneven batch", func(c *TrainConfig) { c.Mode, c.Devices, c.Batch = "ddp", 3, 128 }, []string{"want a multiple of the 3 ranks"}},
		{"dp uneven batch is fine", func(c *TrainConfig) { c.Devices, c.Batch = 3, 128 }, nil},
		{"epochs", func(c *TrainConfig) { c.Epochs = -1 }, []string{"epochs -1"}},
		{"lr", func(c *TrainConfig) { c.LR = -0.1 }, []string{"lr -0.1"}},
		{"schedule", func(c *TrainConfig) { c.Schedule = "step" }, []string{`schedule "step"`}},
		{"warmup", func(c *TrainConfig) { c.Epochs, c.Warmup = 2, 2 }, []string{"warmup 2 epochs"}},
		{"momentum", func(c *TrainConfig) { c.Momentum = 1 }, []string{"momentum 1"}},
		{"nesterov", func(c *TrainConfig) { c.Momentum = 0 }, []string{"nesterov needs a momentum"}},
		{"weight decay", func(c *TrainConfig) { c.WeightDecay = -1 }, []string{"weight decay -1"}},
		{"smoothing", func(c *TrainConfig) { c.LabelSmoothing = 1 }, []string{"label smoothing 1"}},
		{"tf32 on cpu", func(c *TrainConfig) { c.Device, c.TF32 = DeviceCPU, true }, []string{`tf32 is for CUDA devices, not "cpu"`}},
		{"tf32 on cuda", func(c *TrainConfig) { c.Device, c.TF32 = DeviceCUDA, true }, nil},
		{"negatives", func(c *TrainConfig) { c.Prefetch, c.CheckpointEvery, c.MaxSteps, c.Goroutines = -1, -1, -1, -1 },
			[]string{"prefetch -1", "checkpoint every -1", "max steps -1", "goroutines -1"}},
		{"all at once", func(c *TrainConfig) { c.Model, c.Mode, c.Epochs, c.LR = "x", "y", 0, 0 },
			[]string{`model "x"`, `mode "y"`, "epochs 0", "lr 0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			tc.edit(&c)
			err := c.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("valid config rejected: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrTrainConfig) {
				t.Fatalf("err = %v, want ErrTrainConfig", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			if n := strings.Count(err.Error(), "\n"); n != len(tc.want) {
				t.Errorf("%d problems reported, want %d:\n%v", n, len(tc.want), err)
			}
		})
	}
}

func TestEnsureDefaults(t *testing.T) {
	var c TrainConfig
	c.EnsureDefaults()
	if c.Model != "cnn" || c.Mode != "dp" || c.Batch != 128 || c.LR != 0.4 || c.Schedule != "onecycle" ||
		c.EvalAugment != DefaultEvalAugment || len(c.CNN.Widths) == 0 {
		t.Errorf("defaults: %+v", c)
	}
	m := TrainConfig{Model: "mlp"}
	m.EnsureDefaults()
	if m.LR != 0.02 || len(m.CNN.Widths) != 0 {
		t.Errorf("mlp defaults: lr %g, cnn %+v", m.LR, m.CNN)
	}
}

func TestSchedule(t *testing.T) {
	c := validConfig()
	c.Epochs, c.LR = 4, 0.4
	oc := schedule(&c, 100)
	if lr := oc.LR(119); lr < 0.399 || lr > 0.4 { // peak at 30% of 400 steps
		t.Errorf("onecycle lr at step 119 = %g, want the peak 0.4", lr)
	}
	c.Schedule, c.Warmup = "cosine", 1
	cos := schedule(&c, 100)
	if cos.LR(0) != 0.004 || cos.LR(99) != 0.4 || cos.LR(400) != 0 {
		t.Errorf("cosine: %g %g %g", cos.LR(0), cos.LR(99), cos.LR(400))
	}
}
