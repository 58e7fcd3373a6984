package parallel

import (
	"fmt"

	"github.com/loaderd/loaderd/trainer/nn"
	"github.com/loaderd/loaderd/trainer/optim"
	"github.com/loaderd/loaderd/trainer/tensor"
)

// Builder returns a fresh module tree; it is called once per device, and
// NewModel's seeded initialisation makes the replicas start identical.
type Builder func() (nn.Module, error)

// Config is shared by DataParallel and DDP.
type Config struct {
	In        nn.Shape // per-sample input shape
	Seed      uint64   // parameter initialisation
	SGD       optim.SGDConfig
	Smoothing float32 // label smoothing of the cross-entropy
	SyncBN    bool    // BatchNorm over the global batch (see package doc)

	// Precision, when not F32Exact, trains in mixed precision: f32 master
	// weights, forward and backward on their rounded copy with rounded
	// activations (nn.Ctx.Precision). FP16 adds dynamic loss scaling
	// (amp.GradScaler): steps whose gradients overflow are skipped.
	// Evaluation stays f32 on the master weights.
	Precision tensor.Precision
	// InitScale and GrowthInterval override the GradScaler's defaults
	// (2¹⁶ and 2000) when positive.
	InitScale      float32
	GrowthInterval int
}

// Stats summarises one step over the global batch.
type Stats struct {
	Loss    float64 // mean cross-entropy
	Correct int     // arg-max hits
	N       int
	Skipped bool // fp16: the gradients overflowed, the optimizer did not step
}

// replica is one device's model, loss and collective handle.
type replica struct {
	m     *nn.Model
	loss  *nn.SoftmaxCrossEntropy
	comm  Collective
	stats [2]float32
	amp   *mixed // nil in f32
}

func newReplica(dev tensor.Device, build Builder, comm Collective, cfg Config) (*replica, error) {
	root, err := build()
	if err != nil {
		return nil, fmt.Errorf("parallel: build model: %w", err)
	}
	m, err := nn.NewModel(dev, root, cfg.In, cfg.Seed)
	if err != nil {
		return nil, fmt.Errorf("parallel: %w", err)
	}
	if cfg.SyncBN {
		EnableSyncBN(m, comm)
	}
	mx, err := newMixed(dev, m.Weights().Len(), cfg.Precision)
	if err != nil {
		return nil, err
	}
	return &replica{m: m, loss: nn.NewSoftmaxCrossEntropy(cfg.Smoothing), comm: comm, amp: mx}, nil
}

// EnableSyncBN makes every BatchNorm2d of m use global-batch statistics
// through c.
func EnableSyncBN(m *nn.Model, c Collective) {
	nn.Walk(m.Root(), func(mod nn.Module) {
		if bn, ok := mod.(*nn.BatchNorm2d); ok {
			bn.Sync = statSync{c}
		}
	})
}

type statSync struct{ c Collective }

func (s statSync) AllReduceSum(b tensor.Buffer) error { return s.c.AllReduce(b, Sum) }

// forwardBackward uploads a slice of the batch, runs forward, the loss and
// backward with dlogits scaled by gradScale, and keeps [mean loss, correct].
func (r *replica) forwardBackward(x []float32, labels []int32, gradScale float32, train bool) error {
	n := len(labels)
	dev := r.m.Device()
	xt, err := r.m.Input(n)
	if err != nil {
		return err
	}
	lab, err := r.m.Labels(n)
	if err != nil {
		return err
	}
	if err := dev.CopyIn(xt.Buf, x); err != nil {
		return fmt.Errorf("parallel: upload batch: %w", err)
	}
	if err := dev.CopyInInt32(lab, labels); err != nil {
		return fmt.Errorf("parallel: upload labels: %w", err)
	}
	r.m.SetTrain(train)
	if train && r.amp != nil {
		ctx := r.m.Ctx()
		ctx.Precision = r.amp.prec
		defer func() { ctx.Precision = tensor.F32Exact }()
		dev.Round(xt.Buf, r.amp.prec)
		r.amp.enter(dev, r.m.Weights())
		defer r.amp.leave(dev, r.m.Weights(), r.m.Grads())
	}
	y, err := r.m.Forward(xt)
	if err != nil {
		return err
	}
	st, err := r.loss.Forward(r.m.Ctx(), y, lab)
	if err != nil {
		return err
	}
	if train {
		dl, err := r.loss.Backward(r.m.Ctx(), gradScale)
		if err != nil {
			return err
		}
		if err := r.m.Backward(dl); err != nil {
			return err
		}
	}
	return dev.CopyOut(r.stats[:], st)
}

func checkBatch(x []float32, labels []int32, in nn.Shape, minN int) error {
	if len(labels) < minN || len(x) != len(labels)*in.Size() {
		return fmt.Errorf("parallel: batch of %d values for %d labels of %v (need ≥ %d samples): %w",
			len(x), len(labels), in, minN, ErrConfig)
	}
	return nil
}
