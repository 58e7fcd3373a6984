package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/loaderd/loaderd/trainer"
	"github.com/loaderd/loaderd/trainer/devices"
	"github.com/loaderd/loaderd/trainer/dist"
)

// trainConfig is `trainer train` as flags give it.
type trainConfig struct {
	Addr      string
	Dial      dialFlags
	Transport string
	Values    string // where the value ops run: auto, client or daemon
	JSON      bool
	Quiet     bool
	MPILib    string // libmpi file; "" searches the loader's path
	Samples   string // file the ranks append their batches' dataset indices to
	// Launch is what mpirun or torchrun told this process (nil: started
	// alone); LaunchErr a malformed launcher environment.
	Launch    *dist.Launch
	LaunchErr error
	trainer.TrainConfig
}

// multi reports whether this process is one rank of several.
func (c *trainConfig) multi() bool { return c.Launch != nil && c.Launch.World > 1 }

func (c *trainConfig) EnsureDefaults() {
	if c.Addr == "" {
		c.Addr = "127.0.0.1:50051"
	}
	if c.Transport == "" {
		c.Transport = "inline"
	}
	c.SharedMemory = c.Transport == "shm"
	if c.Values == "" {
		c.Values = "auto"
	}
	c.ValuesOnClient = c.Values == "client" || c.Values == "auto" && remote(c.Addr)
	if c.Name == "" {
		c.Name = fmt.Sprintf("trainer-%d", os.Getpid())
	}
	if !c.Quiet && (!c.multi() || c.Launch.Rank == 0) {
		c.Progress = os.Stderr
	}
	if c.multi() {
		if c.Mode == "" {
			c.Mode = "ddp"
		}
		if c.Devices == 0 {
			c.Devices = 1
		}
		c.Name += fmt.Sprintf("-rank%d", c.Launch.Rank)
	}
	c.TrainConfig.EnsureDefaults()
}

// Validate reports every problem at once.
func (c *trainConfig) Validate() error {
	var errs []error
	if c.Transport != "inline" && c.Transport != "shm" {
		errs = append(errs, fmt.Errorf("--transport %q: want inline or shm", c.Transport))
	}
	if c.Values != "auto" && c.Values != "client" && c.Values != "daemon" {
		errs = append(errs, fmt.Errorf("--values %q: want auto, client or daemon", c.Values))
	}
	if c.LaunchErr != nil {
		errs = append(errs, c.LaunchErr)
	}
	if c.multi() {
		l := c.Launch
		if c.Mode != "ddp" || c.Devices != 1 {
			errs = append(errs, fmt.Errorf("started as %v: one process per rank trains with --mode ddp on 1 device (got --mode %s --devices %d)",
				l, c.Mode, c.Devices))
		}
		if c.Batch%l.World != 0 {
			errs = append(errs, fmt.Errorf("--batch %d: the global batch splits over %d ranks; want a multiple of %d", c.Batch, l.World, l.World))
		}
		if l.Launcher != dist.MPIRun {
			errs = append(errs, fmt.Errorf("started as %v by torchrun-style variables (RANK, WORLD_SIZE): CPU ranks all-reduce "+
				"through MPI, so start them with mpirun (see docs/TRAINING.md); torchrun-style launches are for NCCL on GPUs", l))
		}
	}
	if err := c.TrainConfig.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func trainMain(ctx context.Context, args []string) error {
	var c trainConfig
	fs := flag.NewFlagSet("trainer train", flag.ContinueOnError)
	fs.StringVar(&c.Addr, "addr", "", "daemon address: host:port, unix:///path, or a pool of daemons serving the same data: host1:port,host2:port or dns:///name:port (default 127.0.0.1:50051)")
	c.Dial.register(fs)
	fs.StringVar(&c.Dataset, "dataset", "", "training dataset (default synthetic)")
	fs.StringVar(&c.Eval, "eval", "", "dataset to evaluate after every epoch, without random crop or flip")
	fs.StringVar(&c.Model, "model", "", "mlp or cnn (default cnn: ResNet-8-like, 78k parameters)")
	fs.IntVar(&c.Devices, "devices", 0, "devices: CPU (default 2 on 2 or more cores) or CUDA streams spread over the GPUs (default one per GPU)")
	fs.StringVar(&c.Device, "device", deviceAuto, "cpu, cuda, or auto (CUDA when NVML sees a GPU, honouring CUDA_VISIBLE_DEVICES)")
	fs.Func("widths", "the CNN's stage widths, comma-separated (default 16,32,64)", intList(&c.CNN.Widths))
	fs.Func("blocks", "residual blocks per CNN stage, comma-separated (default 1 per stage)", intList(&c.CNN.Blocks))
	fs.IntVar(&c.Goroutines, "goroutines", 0, "goroutines per device (default GOMAXPROCS / devices)")
	fs.StringVar(&c.Mode, "mode", "", "dp (DataParallel, one stream) or ddp (a stream and rank per device) (default dp)")
	fs.BoolVar(&c.SyncBN, "sync-bn", false, "BatchNorm statistics over the global batch")
	fs.BoolVar(&c.TF32, "tf32", false, "CUDA: f32 GEMMs on TF32 tensor cores, as PyTorch's convolutions by default (faster, ~1e-3 relative error)")
	fs.StringVar(&c.AMP, "amp", "", "mixed precision: off, bf16, or fp16 (f32 master weights; fp16 with dynamic loss scaling) (default off)")
	fs.Func("batch", "global batch size, or auto: the largest that fits (doubling, then bisecting; under --device-memory on CPU devices); each ddp rank takes batch/devices (default 128)", batchFlag(&c.TrainConfig))
	fs.Func("device-memory", "bytes each device may allocate, e.g. 2GiB (needed by --batch auto on CPU devices)", func(v string) error {
		n, err := parseBytes(v)
		c.DeviceMemory = n
		return err
	})
	fs.IntVar(&c.EvalBatch, "eval-batch", 0, "evaluation batch size (default 256)")
	fs.IntVar(&c.Epochs, "epochs", 0, "epochs (default 1)")
	fs.Float64Var(&c.LR, "lr", 0, "peak learning rate (default 0.4 for cnn, 0.02 for mlp)")
	fs.StringVar(&c.Schedule, "schedule", "", "onecycle or cosine (default onecycle)")
	fs.Float64Var(&c.Warmup, "warmup", 0, "warm-up in epochs, may be fractional (default: 30% of the run for onecycle, none for cosine)")
	fs.Float64Var(&c.Momentum, "momentum", 0.9, "SGD momentum")
	fs.BoolVar(&c.Nesterov, "nesterov", true, "Nesterov momentum")
	fs.Float64Var(&c.WeightDecay, "wd", 5e-4, "weight decay")
	fs.Float64Var(&c.LabelSmoothing, "label-smoothing", 0, "label smoothing of the cross-entropy")
	fs.Uint64Var(&c.Seed, "seed", 0, "shuffle, augmentation and initialisation seed")
	fs.StringVar(&c.Augment, "augment", "", "training augmentation (default the dataset's: crop, flip, normalize)")
	fs.StringVar(&c.EvalAugment, "eval-augment", "", "evaluation augmentation (default "+trainer.DefaultEvalAugment+")")
	fs.StringVar(&c.Checkpoint, "checkpoint", "", "checkpoint file: resumed from if it exists, saved every --checkpoint-every steps, at epoch ends and on interrupt")
	fs.IntVar(&c.CheckpointEvery, "checkpoint-every", 0, "steps between checkpoints (default 200)")
	fs.Int64Var(&c.MaxSteps, "max-steps", 0, "stop (with a checkpoint) once this many steps of the run are done")
	fs.StringVar(&c.Transport, "transport", "", "inline or shm (shared memory, same host) (default inline)")
	fs.StringVar(&c.Values, "values", "", "where normalisation runs: daemon, or client (uint8 on the wire, a quarter of the bytes, the same floats); auto is client for a pool or a host that is not loopback (default auto)")
	fs.IntVar(&c.Prefetch, "prefetch", 0, "batches each stream receives ahead (default 8)")
	fs.BoolVar(&c.JSON, "json", false, "print a machine-readable summary on stdout")
	fs.BoolVar(&c.Quiet, "quiet", false, "no progress lines")
	fs.StringVar(&c.MPILib, "mpi-lib", "", "Open MPI's libmpi.so.40 for multi-process ddp (default: the loader's search path)")
	fs.StringVar(&c.Samples, "samples", "", "append one line per rank and step naming the dataset indices trained on to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("train: unexpected arguments %q", fs.Args())
	}
	c.Launch, c.LaunchErr = dist.FromEnv(os.Getenv)
	chosen := resolveDevice(&c, devices.Discover)
	c.EnsureDefaults()
	if c.Progress != nil {
		fmt.Fprintf(c.Progress, "trainer: %s\n", chosen)
	}
	if err := c.Validate(); err != nil {
		return err
	}
	return runTrain(ctx, c)
}

func runTrain(ctx context.Context, c trainConfig) (err error) {
	if c.Samples != "" {
		f, err := os.OpenFile(c.Samples, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("train: --samples: %w", err)
		}
		defer f.Close()
		c.TrainConfig.Samples = f
	}
	if c.multi() {
		g, err := joinGroup(ctx, c.Launch, c.MPILib)
		if err != nil {
			return err
		}
		defer func() {
			if cerr := g.Close(err); err == nil {
				err = cerr
			}
		}()
		c.Group = g
	}
	cl, err := c.Dial.dial(c.Addr)
	if err != nil {
		return err
	}
	defer cl.Close()
	res, err := trainer.Train(ctx, cl, c.TrainConfig)
	if c.multi() && c.Launch.Rank != 0 && err == nil {
		return nil // rank 0 reports for the job
	}
	if res != nil && c.JSON { // stopped runs too: the summary says where
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if jerr := enc.Encode(res); jerr != nil && err == nil {
			err = jerr
		}
	} else if err == nil {
		fmt.Println(summary(res))
	}
	if errors.Is(err, trainer.ErrStopped) {
		msg := strings.TrimPrefix(err.Error(), "trainer: ")
		if c.Checkpoint != "" {
			return fmt.Errorf("%s\ncheckpoint %s saved: run the same command to resume", msg, c.Checkpoint)
		}
		return fmt.Errorf("%s (no --checkpoint: the progress is lost)", msg)
	}
	return err
}

func summary(r *trainer.TrainResult) string {
	s := fmt.Sprintf("%s (%d parameters), %s on %d %s devices, batch %d: %d of %d steps", r.Model, r.Params, r.Mode,
		r.Devices, r.Device, r.Batch, r.Steps, r.TotalSteps)
	if r.Start.Epoch > 0 || r.Start.Batch > 0 {
		s += fmt.Sprintf(" (resumed at %v)", r.Start)
	}
	if r.TF32 {
		s += ", tf32"
	}
	if r.AMP != "" && r.AMP != "off" {
		s += fmt.Sprintf(", amp %s", r.AMP)
		if r.LossScale > 0 {
			s += fmt.Sprintf(" (loss scale %g, %d steps skipped on overflow)", r.LossScale, r.SkippedSteps)
		}
	}
	s += fmt.Sprintf(", %d images in %v: %.0f images/s, waiting for data %.1f%% of step time",
		r.Images, time.Duration(r.Seconds*float64(time.Second)).Round(time.Second), r.ImagesPerSec, 100*r.WaitShare)
	if ev := r.Final(); ev != nil {
		s += fmt.Sprintf("\nfinal evaluation: accuracy %.2f%%, loss %.4f on %d images", 100*ev.Accuracy, ev.Loss, ev.Images)
	}
	if !r.Done {
		s += fmt.Sprintf("\nstopped at %v (--max-steps); the checkpoint resumes there", r.Position)
	}
	return s
}

// failExit is how long a rank blocked in a collective gets, once another
// rank has failed, to return on its own before the process exits.
const failExit = time.Second

// joinGroup makes this process its rank of the job, with MPI collectives
// (CPU devices). When another rank fails, this one stops within failExit
// naming it, even if it is blocked inside an MPI call, which nothing can
// interrupt.
func joinGroup(ctx context.Context, l *dist.Launch, mpiLib string) (*dist.Group, error) {
	o := dist.Options{OnFailure: func(err error) {
		time.AfterFunc(failExit, func() {
			fmt.Fprintf(os.Stderr, "trainer: rank %d: stopping: %v\n", l.Rank, err)
			time.Sleep(200 * time.Millisecond) // mpirun forwards the line before it sees the exit
			os.Exit(1)
		})
	}}
	return dist.InitMPI(ctx, l, mpiLib, o)
}

// intList parses a comma-separated list of positive integers into *dst.
func intList(dst *[]int) func(string) error {
	return func(v string) error {
		*dst = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return fmt.Errorf("%q: want positive integers separated by commas", v)
			}
			*dst = append(*dst, n)
		}
		return nil
	}
}

// batchFlag parses --batch: a positive integer, or auto.
func batchFlag(c *trainer.TrainConfig) func(string) error {
	return func(v string) error {
		if v == "auto" {
			c.AutoBatch, c.Batch = true, 0
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("%q: want a positive integer or auto", v)
		}
		c.AutoBatch, c.Batch = false, n
		return nil
	}
}

// parseBytes reads a memory size: bytes, or a number with a binary unit
// (KiB, MiB, GiB, TiB, or K, M, G, T), e.g. 2GiB or 1.5G.
func parseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	num := strings.TrimRightFunc(t, unicode.IsLetter)
	shift, ok := map[string]uint{"": 0, "B": 0, "K": 10, "KiB": 10, "M": 20, "MiB": 20,
		"G": 30, "GiB": 30, "T": 40, "TiB": 40}[t[len(num):]]
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if !ok || err != nil || v < 0 || v >= float64(int64(1)<<(62-shift)) {
		return 0, fmt.Errorf("size %q: want bytes, or a number with KiB, MiB, GiB or TiB", s)
	}
	return int64(v * float64(int64(1)<<shift)), nil
}
