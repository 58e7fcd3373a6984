package trainer

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/loaderd/loaderd/client"
	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/trainer/nn"
	"github.com/loaderd/loaderd/trainer/tensor"
)

// evaluator runs replicas in eval mode (running BatchNorm statistics) over
// a dataset, each device taking a slice of every batch.
type evaluator struct {
	ms    []*nn.Model
	loss  []*nn.SoftmaxCrossEntropy
	st    [][2]float32
	errs  []error
	spare spare
}

func newEvaluator(ms []*nn.Model) *evaluator {
	e := &evaluator{ms: ms, st: make([][2]float32, len(ms)), errs: make([]error, len(ms))}
	for range ms {
		e.loss = append(e.loss, nn.NewSoftmaxCrossEntropy(0))
	}
	return e
}

// syncState gives every replica replica 0's running statistics. DDP ranks
// keep their own between steps (the next step broadcasts rank 0's), so
// without this the slices of an evaluation would see different models.
func (e *evaluator) syncState() error {
	if len(e.ms) < 2 {
		return nil
	}
	m0 := e.ms[0]
	host := make([]float32, m0.StateBuf().Len())
	if err := m0.Device().CopyOut(host, m0.StateBuf()); err != nil {
		return err
	}
	for _, m := range e.ms[1:] {
		if err := m.Device().CopyIn(m.StateBuf(), host); err != nil {
			return err
		}
		if err := m.Device().Sync(); err != nil {
			return err
		}
	}
	return nil
}

// evalStream is the stream an evaluation reads: one unshuffled pass.
func evalStream(cfg *TrainConfig) client.StreamConfig {
	return client.StreamConfig{Dataset: cfg.Eval, BatchSize: cfg.EvalBatch, NoShuffle: true, Epochs: 1,
		Augment: cfg.EvalAugment, DType: sample.F32, Layout: sample.CHW, SharedMemory: cfg.SharedMemory,
		Prefetch: cfg.Prefetch, ValuesOnClient: cfg.ValuesOnClient, Name: cfg.Name + "-eval"}
}

// run evaluates one pass over dataset.
func (e *evaluator) run(ctx context.Context, c *client.Client, cfg *TrainConfig) (*EvalResult, error) {
	t0 := time.Now()
	if err := e.syncState(); err != nil {
		return nil, fmt.Errorf("trainer: eval: %w", err)
	}
	s, err := c.Open(ctx, evalStream(cfg))
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if err := checkHeader(s.Header(), cfg.Eval); err != nil {
		return nil, err
	}
	defer func() {
		for _, m := range e.ms {
			m.SetTrain(true)
		}
	}()
	var lossSum float64
	var correct, n int64
	for {
		b, err := s.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("trainer: eval %q: %w", cfg.Eval, err)
		}
		x, err := batchFloats(b, &e.spare)
		var l float64
		var k int64
		if err == nil {
			l, k, err = e.batch(x, b.Labels)
		}
		if rerr := b.Release(); err == nil {
			err = rerr
		}
		if err != nil {
			return nil, fmt.Errorf("trainer: eval %q: %w", cfg.Eval, err)
		}
		lossSum += l
		correct += k
		n += int64(len(b.Labels))
	}
	if n == 0 {
		return nil, fmt.Errorf("trainer: eval %q: the dataset gave no samples", cfg.Eval)
	}
	return &EvalResult{Loss: lossSum / float64(n), Accuracy: float64(correct) / float64(n), Images: n,
		Seconds: time.Since(t0).Seconds()}, nil
}

// batch splits one batch over the replicas and returns Σ loss and hits.
func (e *evaluator) batch(x []float32, labels []int32) (float64, int64, error) {
	n, sz := len(labels), nn.CIFAR.Size()
	if len(x) != n*sz {
		return 0, 0, fmt.Errorf("batch of %d values for %d labels", len(x), n)
	}
	k := min(len(e.ms), n)
	var wg sync.WaitGroup
	for i := range k {
		lo, hi := n*i/k, n*(i+1)/k
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.errs[i] = e.forward(i, x[lo*sz:hi*sz], labels[lo:hi])
		}()
	}
	wg.Wait()
	var loss float64
	var hits int64
	for i := range k {
		if e.errs[i] != nil {
			return 0, 0, e.errs[i]
		}
		loss += float64(e.st[i][0]) * float64(n*(i+1)/k-n*i/k)
		hits += int64(e.st[i][1])
	}
	return loss, hits, nil
}

func (e *evaluator) forward(i int, x []float32, labels []int32) error {
	m := e.ms[i]
	m.SetTrain(false)
	dev := m.Device()
	xt, err := m.Input(len(labels))
	if err != nil {
		return err
	}
	lab, err := m.Labels(len(labels))
	if err != nil {
		return err
	}
	if err := dev.CopyIn(xt.Buf, x); err != nil {
		return err
	}
	if err := dev.CopyInInt32(lab, labels); err != nil {
		return err
	}
	y, err := m.Forward(xt)
	if err != nil {
		return err
	}
	st, err := e.loss[i].Forward(m.Ctx(), y, lab)
	if err != nil {
		return err
	}
	return dev.CopyOut(e.st[i][:], st)
}

// newDevices makes k CPU devices of g goroutines each.
func newDevices(k, g int) ([]tensor.Device, error) {
	var devs []tensor.Device
	for i := range k {
		d, err := tensor.NewCPU(fmt.Sprintf("cpu:%d", i), g)
		if err != nil {
			closeDevices(devs)
			return nil, err
		}
		devs = append(devs, d)
	}
	return devs, nil
}

func closeDevices(devs []tensor.Device) {
	for _, d := range devs {
		d.Close()
	}
}
