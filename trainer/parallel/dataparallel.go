package parallel

import (
	"fmt"
	"sync"

	"github.com/loaderd/loaderd/trainer/amp"
	"github.com/loaderd/loaderd/trainer/nn"
	"github.com/loaderd/loaderd/trainer/optim"
	"github.com/loaderd/loaderd/trainer/tensor"
)

// DataParallel trains one model on K devices from one goroutine, like
// torch.nn.DataParallel: each Step scatters the batch into K slices (sizes
// differ by at most one), runs forward and backward on all devices
// concurrently, sums the gradients into device 0, takes one optimizer step
// there and broadcasts the weights (and, without SyncBN, the running
// statistics) back, so the replicas stay identical.
type DataParallel struct {
	reps    []*replica
	opt     *optim.SGD
	scaler  *amp.GradScaler // fp16 only
	skipped bool            // the last step's gradients overflowed
	cfg     Config
	errs    []error
}

// NewDataParallel builds a replica of the model on every device.
func NewDataParallel(devs []tensor.Device, build Builder, cfg Config) (*DataParallel, error) {
	comms, err := NewHostGroup(devs)
	if err != nil {
		return nil, err
	}
	p := &DataParallel{cfg: cfg, errs: make([]error, len(devs)), scaler: newScaler(cfg)}
	for i, d := range devs {
		r, err := newReplica(d, build, comms[i], cfg)
		if err != nil {
			return nil, fmt.Errorf("parallel: replica %d: %w", i, err)
		}
		p.reps = append(p.reps, r)
	}
	if p.opt, err = optim.ForModel(p.reps[0].m, cfg.SGD); err != nil {
		return nil, err
	}
	return p, nil
}

// Devices returns K.
func (p *DataParallel) Devices() int { return len(p.reps) }

// Model returns replica i's model (replica 0 is the one that steps).
func (p *DataParallel) Model(i int) *nn.Model { return p.reps[i].m }

// Optimizer returns the optimizer on device 0 (e.g. to cycle momentum).
func (p *DataParallel) Optimizer() *optim.SGD { return p.opt }

// Scaler returns the loss scaler under fp16 (to checkpoint or restore its
// state), else nil.
func (p *DataParallel) Scaler() *amp.GradScaler { return p.scaler }

// Broadcast copies replica 0's weights and running statistics to all
// replicas: call it after loading a checkpoint into Model(0) (and the
// optimizer state into Optimizer()).
func (p *DataParallel) Broadcast() error {
	var wg sync.WaitGroup
	for i, r := range p.reps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.errs[i] = r.comm.Broadcast(r.m.Weights(), 0)
			if p.errs[i] == nil {
				p.errs[i] = r.comm.Broadcast(r.m.StateBuf(), 0)
			}
			if p.errs[i] != nil {
				r.comm.Abort(p.errs[i])
			}
		}()
	}
	wg.Wait()
	for i, err := range p.errs {
		if err != nil {
			return fmt.Errorf("parallel: broadcast to replica %d: %w", i, err)
		}
	}
	return nil
}

// Step trains on one global batch: x is N×In (NCHW), labels N class indices.
func (p *DataParallel) Step(x []float32, labels []int32, lr float64) (Stats, error) {
	return p.run(x, labels, lr, true)
}

// Evaluate computes loss and accuracy in eval mode without changing anything.
func (p *DataParallel) Evaluate(x []float32, labels []int32) (Stats, error) {
	return p.run(x, labels, 0, false)
}

func (p *DataParallel) run(x []float32, labels []int32, lr float64, train bool) (Stats, error) {
	k, sz := len(p.reps), p.cfg.In.Size()
	if err := checkBatch(x, labels, p.cfg.In, k); err != nil {
		return Stats{}, err
	}
	n := len(labels)
	scale := lossScale(p.scaler) / float32(n)
	p.skipped = false
	var wg sync.WaitGroup
	for i := range p.reps {
		lo, hi := n*i/k, n*(i+1)/k
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.errs[i] = p.replicaStep(i, x[lo*sz:hi*sz], labels[lo:hi], scale, lr, train)
		}()
	}
	wg.Wait()
	st := Stats{N: n, Skipped: p.skipped}
	for i, r := range p.reps {
		if p.errs[i] != nil {
			return Stats{}, fmt.Errorf("parallel: replica %d: %w", i, p.errs[i])
		}
		hi, lo := n*(i+1)/k, n*i/k
		st.Loss += float64(r.stats[0]) * float64(hi-lo) / float64(n)
		st.Correct += int(r.stats[1])
	}
	return st, nil
}

func (p *DataParallel) replicaStep(i int, x []float32, labels []int32, scale float32, lr float64, train bool) error {
	r := p.reps[i]
	err := r.forwardBackward(x, labels, scale, train)
	if err == nil && train {
		err = p.reduceStepBroadcast(i, lr)
	}
	if err != nil {
		r.comm.Abort(err) // release the other replicas from their collectives
	}
	return err
}

func (p *DataParallel) reduceStepBroadcast(i int, lr float64) error {
	r := p.reps[i]
	if err := r.comm.Reduce(r.m.Grads(), Sum, 0); err != nil {
		return err
	}
	if i == 0 {
		if err := p.step(r, lr); err != nil {
			return err
		}
	}
	if err := r.comm.Broadcast(r.m.Weights(), 0); err != nil {
		return err
	}
	if !p.cfg.SyncBN {
		return r.comm.Broadcast(r.m.StateBuf(), 0)
	}
	return nil
}

// step unscales and checks the summed gradients under fp16, then steps
// the optimizer unless they overflowed, and moves the scale.
func (p *DataParallel) step(r *replica, lr float64) error {
	if p.scaler == nil {
		return p.opt.Step(lr)
	}
	found, err := r.amp.unscale(r.m.Device(), r.m.Grads(), p.scaler)
	if err != nil {
		return err
	}
	if !found {
		err = p.opt.Step(lr)
	}
	p.scaler.Update(found)
	p.skipped = found
	return err
}
