package trainer

import (
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/loaderd/loaderd/sampler"
	"github.com/loaderd/loaderd/trainer/amp"
	"github.com/loaderd/loaderd/trainer/nn"
	"github.com/loaderd/loaderd/trainer/parallel"
	"github.com/loaderd/loaderd/trainer/tensor"
)

// ErrTrainConfig reports an invalid TrainConfig.
var ErrTrainConfig = errors.New("trainer: invalid training configuration")

// DefaultEvalAugment is the evaluation transform: normalisation only, no
// random crop or flip (torchvision's test transform for CIFAR).
const DefaultEvalAugment = "normalize=cifar10,out=f32:chw"

// TrainConfig configures Train. Call EnsureDefaults, then Validate.
type TrainConfig struct {
	Dataset string // training dataset, as the daemon names it
	Eval    string // dataset evaluated after every epoch; "" for none

	Model      string       // "mlp" or "cnn"
	CNN        nn.CNNConfig // the CNN's shape; zero is nn.DefaultCNN
	Mode       string       // "dp": DataParallel on one stream; "ddp": one stream and rank per device
	Devices    int          // devices K (CPU, or CUDA streams spread over the GPUs)
	Device     string       // "cpu" (the default) or "cuda" (see DeviceCPU, DeviceCUDA)
	Goroutines int          // per device; 0 shares GOMAXPROCS among the devices
	SyncBN     bool         // BatchNorm over the global batch
	// AMP is the mixed precision: "off" (the default), "bf16" or "fp16"
	// (with dynamic loss scaling); see parallel.Config.Precision.
	AMP string
	// TF32 lets cuBLAS use TF32 tensor cores for the f32 GEMMs on CUDA
	// devices, as PyTorch's cuDNN convolutions do by default: several
	// times the f32 rate, about 1e-3 relative error per GEMM.
	TF32 bool
	// Group, when set, makes this process rank Group.Rank() of Group.Size()
	// processes (see trainer/dist): Mode ddp on one device, each epoch split
	// into Group.Size() ranks, Batch the global batch. Rank 0 evaluates and
	// writes the checkpoint; every rank resumes from it, so it must be the
	// same file for all (a shared file system when they span nodes).
	Group parallel.Collective

	Batch     int // global batch; each DDP rank takes Batch/Devices
	EvalBatch int
	Epochs    int

	// AutoBatch makes Train pick Batch: the largest that fits the devices
	// (see autoBatch), starting from Batch when set. On CPU devices it
	// needs DeviceMemory; a resumed run keeps its checkpoint's batch.
	AutoBatch    bool
	DeviceMemory int64 // bytes each device may allocate; 0: no limit but the device's

	LR             float64 // peak learning rate
	Schedule       string  // "onecycle" or "cosine"
	Warmup         float64 // epochs of warm-up; 0: 30% of the run for onecycle, none for cosine
	Momentum       float64
	Nesterov       bool
	WeightDecay    float64
	LabelSmoothing float64
	Seed           uint64 // shuffle, augmentation and initialisation

	Augment      string // training transform; "" is the dataset's default
	EvalAugment  string
	SharedMemory bool // receive batches through the daemon's shared memory
	// ValuesOnClient receives uint8 pixels and normalises them here, by the
	// daemon's table (client.Batch.Values): a quarter of the bytes, for
	// daemons across the network; the same floats, bit for bit.
	ValuesOnClient bool
	Prefetch       int // batches each stream receives ahead; 0 is the client's default

	// Checkpoint is a file path. If it exists, training resumes from it;
	// it is written every CheckpointEvery steps, at every epoch's end and
	// when training stops, atomically (temporary file and rename).
	Checkpoint      string
	CheckpointEvery int
	// MaxSteps stops training (with a checkpoint) once this many steps of
	// the whole run, counted from its very start, are done; 0 runs every epoch.
	MaxSteps int64

	Progress io.Writer // live progress line and per-epoch lines; nil for none
	// Samples, when set, gets one line per rank and step naming the dataset
	// indices trained on: "epoch E batch B rank R: i i …".
	Samples  io.Writer
	Interval time.Duration // between progress updates
	Name     string        // client name the daemon logs
}

// EnsureDefaults fills what was left unset.
func (c *TrainConfig) EnsureDefaults() {
	if c.Dataset == "" {
		c.Dataset = "synthetic"
	}
	if c.Model == "" {
		c.Model = "cnn"
	}
	if c.Model == "cnn" && len(c.CNN.Widths) == 0 {
		c.CNN.Widths = nn.DefaultCNN.Widths
	}
	if c.Model == "cnn" && len(c.CNN.Blocks) == 0 {
		for range c.CNN.Widths {
			c.CNN.Blocks = append(c.CNN.Blocks, 1)
		}
	}
	if c.Model == "cnn" && c.CNN.Classes == 0 {
		c.CNN.Classes = nn.DefaultCNN.Classes
	}
	if c.Mode == "" {
		c.Mode = "dp"
		if c.Group != nil {
			c.Mode = "ddp"
		}
	}
	if c.Device == "" {
		c.Device = DeviceCPU
	}
	if c.AMP == "" {
		c.AMP = "off"
	}
	if c.Devices == 0 && c.Device == DeviceCUDA {
		c.Devices = 1 // one stream on GPU 0; --devices K spreads K over the GPUs
	}
	if c.Devices == 0 && c.Group != nil {
		c.Devices = 1 // one rank, one device per process
	}
	if c.Devices == 0 {
		c.Devices, _ = tensor.PlanCPU(0, 0)
	}
	if c.Batch == 0 && !c.AutoBatch {
		c.Batch = 128
	}
	if c.EvalBatch == 0 {
		c.EvalBatch = 256
	}
	if c.Epochs == 0 {
		c.Epochs = 1
	}
	if c.LR == 0 {
		c.LR = 0.4 // one-cycle peak measured on CIFAR-10 with batch 128
		if c.Model == "mlp" {
			c.LR = 0.02
		}
	}
	if c.Schedule == "" {
		c.Schedule = "onecycle"
	}
	if c.EvalAugment == "" {
		c.EvalAugment = DefaultEvalAugment
	}
	if c.CheckpointEvery == 0 {
		c.CheckpointEvery = 200
	}
	if c.Interval == 0 {
		c.Interval = time.Second
	}
}

// Validate reports every problem at once; errors match ErrTrainConfig.
func (c *TrainConfig) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.Dataset == "" {
		bad("dataset: empty name")
	}
	if c.Model != "mlp" && c.Model != "cnn" {
		bad("model %q: want mlp or cnn", c.Model)
	}
	if c.Model == "cnn" {
		if _, err := nn.NewCNN(c.CNN); err != nil {
			bad("cnn shape: %v", err)
		}
	}
	if c.Mode != "dp" && c.Mode != "ddp" {
		bad("mode %q: want dp or ddp", c.Mode)
	}
	if c.Device != DeviceCPU && c.Device != DeviceCUDA {
		bad("device %q: want %s or %s", c.Device, DeviceCPU, DeviceCUDA)
	}
	if c.Devices < 1 || c.Devices > 256 {
		bad("devices %d: want 1..256", c.Devices)
	}
	if _, err := amp.ParseMode(c.AMP); err != nil {
		bad("%v", err) // "amp: unknown mode ..."
	}
	if c.TF32 && c.Device != DeviceCUDA {
		bad("tf32 is for CUDA devices, not %q", c.Device)
	}
	if c.Goroutines < 0 || c.Goroutines > 1024 {
		bad("goroutines %d: want 0 (share the cores) to 1024", c.Goroutines)
	}
	if c.AutoBatch && c.Device == DeviceCPU && c.DeviceMemory <= 0 {
		bad("batch auto on CPU devices: set a device memory limit to search under")
	}
	if c.DeviceMemory < 0 {
		bad("device memory %d is negative", c.DeviceMemory)
	}
	switch {
	case c.AutoBatch && c.Batch == 0: // Train picks it
	case c.Batch < max(1, c.Devices):
		bad("batch %d: want at least one sample per device (%d)", c.Batch, c.Devices)
	case c.Mode == "ddp" && c.Devices > 0 && c.Batch%c.world() != 0:
		bad("batch %d: ddp splits it into equal per-rank batches; want a multiple of the %d ranks", c.Batch, c.world())
	}

	if c.Group != nil && (c.Mode != "ddp" || c.Devices != 1) {
		bad("rank %d of %d processes: want mode ddp on 1 device (got mode %q, %d devices)",
			c.Group.Rank(), c.Group.Size(), c.Mode, c.Devices)
	}
	if c.EvalBatch < 1 {
		bad("eval batch %d: want at least 1", c.EvalBatch)
	}
	if c.Epochs < 1 {
		bad("epochs %d: want at least 1", c.Epochs)
	}
	if !(c.LR > 0) || math.IsInf(c.LR, 0) {
		bad("lr %g: want a positive number", c.LR)
	}
	if c.Schedule != "onecycle" && c.Schedule != "cosine" {
		bad("schedule %q: want onecycle or cosine", c.Schedule)
	}
	if c.Warmup < 0 || (c.Epochs > 0 && c.Warmup >= float64(c.Epochs)) {
		bad("warmup %g epochs: want 0 <= warmup < epochs (%d)", c.Warmup, c.Epochs)
	}
	if c.Momentum < 0 || c.Momentum >= 1 {
		bad("momentum %g: want 0 <= momentum < 1", c.Momentum)
	}
	if c.Nesterov && c.Momentum == 0 {
		bad("nesterov needs a momentum above 0")
	}
	if c.WeightDecay < 0 {
		bad("weight decay %g is negative", c.WeightDecay)
	}
	if c.LabelSmoothing < 0 || c.LabelSmoothing >= 1 {
		bad("label smoothing %g: want 0 <= smoothing < 1", c.LabelSmoothing)
	}
	if c.Prefetch < 0 {
		bad("prefetch %d is negative", c.Prefetch)
	}
	if c.CheckpointEvery < 0 {
		bad("checkpoint every %d steps: want 0 (epoch ends only) or more", c.CheckpointEvery)
	}
	if c.MaxSteps < 0 {
		bad("max steps %d is negative", c.MaxSteps)
	}
	if c.Interval < 0 {
		bad("progress interval %v is negative", c.Interval)
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w:\n%w", ErrTrainConfig, errors.Join(errs...))
}

// precision is the engine's rounding for c.AMP (f32 when invalid: Validate
// reports it).
func (c *TrainConfig) precision() tensor.Precision {
	m, _ := amp.ParseMode(c.AMP)
	return map[amp.Mode]tensor.Precision{amp.BF16: tensor.BF16, amp.FP16: tensor.FP16}[m]
}

// ampName is c.AMP's canonical name, "" for f32.
func (c *TrainConfig) ampName() string {
	if m, err := amp.ParseMode(c.AMP); err == nil && m != amp.Off {
		return m.String()
	}
	return ""
}

// world is the number of ranks the sampler splits an epoch into.
func (c *TrainConfig) world() int {
	if c.Group != nil {
		return c.Group.Size()
	}
	if c.Mode == "ddp" {
		return c.Devices
	}
	return 1
}

// EvalResult is one pass over the evaluation dataset in eval mode.
type EvalResult struct {
	Loss     float64 `json:"loss"`
	Accuracy float64 `json:"accuracy"`
	Images   int64   `json:"images"`
	Seconds  float64 `json:"seconds"`
}

// EpochResult summarises one finished epoch.
type EpochResult struct {
	Epoch        int64       `json:"epoch"`
	Steps        int64       `json:"steps"`
	Loss         float64     `json:"loss"`     // mean training loss over the epoch
	Accuracy     float64     `json:"accuracy"` // training accuracy (augmented, train mode)
	Seconds      float64     `json:"seconds"`  // training time, evaluation excluded
	ImagesPerSec float64     `json:"images_per_s"`
	WaitShare    float64     `json:"wait_share"` // share of step time spent waiting for data
	Eval         *EvalResult `json:"eval,omitempty"`
}

// TrainResult is what Train did, over the whole run when it resumed.
type TrainResult struct {
	Model        string  `json:"model"`
	Mode         string  `json:"mode"`
	Device       string  `json:"device"` // cpu or cuda
	Devices      int     `json:"devices"`
	AMP          string  `json:"amp"`                     // off, bf16 or fp16
	TF32         bool    `json:"tf32,omitempty"`          // cuBLAS on TF32 tensor cores
	SkippedSteps int64   `json:"skipped_steps,omitempty"` // fp16: overflowed, not applied (this process)
	LossScale    float32 `json:"loss_scale,omitempty"`    // fp16: the scale at the end
	// HostRegister says whether the shared-memory region was page-locked
	// for the devices (CUDA with --transport shm), or why not; "" when
	// there was nothing to register.
	HostRegister string `json:"host_register,omitempty"`
	// ValuesOnClient: the batches came as uint8 and the trainer applied
	// the normalisation (TrainConfig.ValuesOnClient, and a daemon that
	// supports it).
	ValuesOnClient bool `json:"values_on_client,omitempty"`
	// Kernels says how CUDA devices loaded their kernels: "PTX", or
	// "CUBIN sm_XY (…)" when the driver refused the PTX; "" on the CPU.
	Kernels string `json:"kernels,omitempty"`
	// Convolutions says what runs the CUDA devices' convolutions: "cuDNN
	// 9.x.y (path)", or the own kernels and why not cuDNN; "" on the CPU.
	Convolutions string           `json:"convolutions,omitempty"`
	Params       int              `json:"params"`
	Start        sampler.Position `json:"start"`    // where this process began
	Position     sampler.Position `json:"position"` // next batch to train on
	Steps        int64            `json:"steps"`    // done in the whole run
	Batch        int              `json:"batch"`
	BatchSearch  []BatchTrial     `json:"batch_search,omitempty"` // --batch auto's tries
	TotalSteps   int64            `json:"total_steps"`
	Done         bool             `json:"done"` // every epoch is trained
	Epochs       []EpochResult    `json:"epochs"`
	Images       int64            `json:"images"`  // trained by this process
	Seconds      float64          `json:"seconds"` // this process, evaluation included
	ImagesPerSec float64          `json:"images_per_s"`
	WaitShare    float64          `json:"wait_share"`
	Checkpoint   string           `json:"checkpoint,omitempty"`
}

// Final returns the last epoch's evaluation, or nil.
func (r *TrainResult) Final() *EvalResult {
	if len(r.Epochs) == 0 {
		return nil
	}
	return r.Epochs[len(r.Epochs)-1].Eval
}
