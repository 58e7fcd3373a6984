package trainer

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/loaderd/loaderd/client"
	"github.com/loaderd/loaderd/trainer/nn"
	"github.com/loaderd/loaderd/trainer/parallel"
	"github.com/loaderd/loaderd/trainer/tensor"
)

// BatchTrial is one batch size --batch auto tried.
type BatchTrial struct {
	Batch int  `json:"batch"`
	Fits  bool `json:"fits"`
}

// searchBatch returns the largest multiple of step in [start, hi] for
// which fits returns nil, trying start, doubling while it fits, then
// bisecting between the last fit and the first failure. A failure must
// match tensor.ErrOutOfMemory; any other error ends the search. start
// itself must fit.
func searchBatch(start, step, hi int, fits func(int) error) (int, []BatchTrial, error) {
	var trials []BatchTrial
	try := func(b int) (bool, error) {
		err := fits(b)
		if err != nil && !errors.Is(err, tensor.ErrOutOfMemory) {
			return false, fmt.Errorf("trainer: batch %d: %w", b, err)
		}
		trials = append(trials, BatchTrial{Batch: b, Fits: err == nil})
		return err == nil, nil
	}
	start = max(step, start/step*step)
	hi = hi / step * step
	if start > hi {
		return 0, nil, fmt.Errorf("trainer: batch auto: start %d above the largest batch %d: %w", start, hi, ErrTrainConfig)
	}
	ok, err := try(start)
	if err != nil || !ok {
		if err == nil {
			err = fmt.Errorf("trainer: batch auto: even batch %d does not fit: %w", start, tensor.ErrOutOfMemory)
		}
		return 0, trials, err
	}
	good, bad := start, 0
	for bad == 0 && good < hi {
		b := min(2*good, hi)
		if ok, err = try(b); err != nil {
			return 0, trials, err
		}
		if ok {
			good = b
		} else {
			bad = b
		}
	}
	for bad-good > step {
		mid := (good + bad) / 2 / step * step
		if ok, err = try(mid); err != nil {
			return 0, trials, err
		}
		if ok {
			good = mid
		} else {
			bad = mid
		}
	}
	return good, trials, nil
}

// autoBatch finds cfg.Batch for --batch auto: for each candidate it opens
// the devices afresh (under cfg.DeviceMemory on CPU devices), builds the
// replicas and runs one training step on random data, then closes them,
// which frees whatever the step allocated before the next try.
func autoBatch(cfg *TrainConfig, g int) (int, []BatchTrial, error) {
	build, pc := builder(cfg), parallelConfig(cfg)
	classes := 10
	if cfg.Model == "cnn" {
		classes = cfg.CNN.Classes
	}
	fits := func(b int) error {
		devs, err := openDevices(cfg, g)
		if err != nil {
			return err
		}
		defer closeDevices(devs)
		if cfg.DeviceMemory > 0 {
			for _, d := range devs {
				if c, ok := d.(*tensor.CPU); ok {
					c.SetMemoryLimit(cfg.DeviceMemory)
				}
			}
		}
		dp, err := parallel.NewDataParallel(devs, build, pc)
		if err != nil {
			return err
		}
		r := rand.New(rand.NewPCG(uint64(b), 1))
		x := make([]float32, b*nn.CIFAR.Size())
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		labels := make([]int32, b)
		for i := range labels {
			labels[i] = int32(r.IntN(classes))
		}
		_, err = dp.Step(x, labels, 0)
		return err
	}
	// ddp splits the batch over the ranks, DataParallel over the devices:
	// equal shares either way. One stream carries at most client.MaxBatchSize.
	step := max(cfg.world(), cfg.Devices)
	hi := client.MaxBatchSize * cfg.world()
	return searchBatch(max(cfg.Batch, 32), step, hi, fits)
}

// pickBatch settles cfg.Batch for AutoBatch: the checkpoint's when one
// exists (a resumed run must keep its batch), else the search's result.
func pickBatch(cfg *TrainConfig, res *TrainResult) error {
	defer func() { res.Batch = cfg.Batch }()
	if !cfg.AutoBatch {
		return nil
	}
	if cfg.Checkpoint != "" {
		if ck, err := ReadCheckpoint(cfg.Checkpoint); err == nil {
			cfg.Batch = ck.Meta.Fingerprint.Batch
			return cfg.Validate()
		}
	}
	g := cfg.Goroutines
	if g == 0 {
		_, g = tensor.PlanCPU(cfg.Devices, 0)
	}
	b, trials, err := autoBatch(cfg, g)
	res.BatchSearch = trials
	if err != nil {
		return err
	}
	cfg.Batch = b
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "batch auto: %d (tried %v)\n", b, trials)
	}
	return cfg.Validate()
}
