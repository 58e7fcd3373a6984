package parallel

import (
	"fmt"

	"github.com/loaderd/loaderd/trainer/amp"
	"github.com/loaderd/loaderd/trainer/nn"
	"github.com/loaderd/loaderd/trainer/optim"
	"github.com/loaderd/loaderd/trainer/tensor"
)

// Rank is one worker of distributed data-parallel training (torch DDP):
// it owns a model replica, an optimizer and its own data (rank r of world
// K in the distributed sampler). Step is collective: every rank calls it
// concurrently, each from its own goroutine (or process, with a Collective
// that spans processes).
type Rank struct {
	rep    *replica
	opt    *optim.SGD
	cfg    Config
	synced bool
	scaler *amp.GradScaler // fp16 only
	stats  tensor.Buffer
	hostSt [3]float32
}

// NewRank builds rank comm.Rank()'s replica of the model on dev.
func NewRank(dev tensor.Device, build Builder, comm Collective, cfg Config) (*Rank, error) {
	rep, err := newReplica(dev, build, comm, cfg)
	if err != nil {
		return nil, err
	}
	opt, err := optim.ForModel(rep.m, cfg.SGD)
	if err != nil {
		return nil, err
	}
	st, err := dev.Alloc(tensor.F32, 3)
	if err != nil {
		return nil, fmt.Errorf("parallel: %w", err)
	}
	return &Rank{rep: rep, opt: opt, cfg: cfg, stats: st, scaler: newScaler(cfg)}, nil
}

// NewDDP returns one Rank per device over a host-memory group.
func NewDDP(devs []tensor.Device, build Builder, cfg Config) ([]*Rank, error) {
	comms, err := NewHostGroup(devs)
	if err != nil {
		return nil, err
	}
	ranks := make([]*Rank, len(devs))
	for i, d := range devs {
		if ranks[i], err = NewRank(d, build, comms[i], cfg); err != nil {
			return nil, fmt.Errorf("parallel: rank %d: %w", i, err)
		}
	}
	return ranks, nil
}

func (r *Rank) Model() *nn.Model      { return r.rep.m }
func (r *Rank) Optimizer() *optim.SGD { return r.opt }

// Scaler returns the rank's loss scaler under fp16, else nil. Every rank
// sees the same all-reduced gradients, so the scalers stay equal.
func (r *Rank) Scaler() *amp.GradScaler { return r.scaler }
func (r *Rank) Collective() Collective  { return r.rep.comm }

// Step trains on this rank's slice of the global batch and returns
// statistics over the global batch (all ranks see the same).
func (r *Rank) Step(x []float32, labels []int32, lr float64) (Stats, error) {
	st, err := r.step(x, labels, lr)
	if err != nil {
		r.rep.comm.Abort(err)
		return Stats{}, fmt.Errorf("parallel: rank %d: %w", r.rep.comm.Rank(), err)
	}
	return st, nil
}

func (r *Rank) step(x []float32, labels []int32, lr float64) (Stats, error) {
	if err := checkBatch(x, labels, r.cfg.In, 1); err != nil {
		return Stats{}, err
	}
	m, c := r.rep.m, r.rep.comm
	if !r.synced { // start from rank 0's weights, as DDP's constructor does
		if err := c.Broadcast(m.Weights(), 0); err != nil {
			return Stats{}, err
		}
		r.synced = true
	}
	if !r.cfg.SyncBN { // broadcast_buffers=True
		if err := c.Broadcast(m.StateBuf(), 0); err != nil {
			return Stats{}, err
		}
	}
	n := len(labels)
	if err := r.rep.forwardBackward(x, labels, lossScale(r.scaler)/float32(n), true); err != nil {
		return Stats{}, err
	}
	if err := c.AllReduce(m.Grads(), Avg); err != nil {
		return Stats{}, err
	}
	skipped := false
	if r.scaler != nil {
		var err error
		if skipped, err = r.rep.amp.unscale(m.Device(), m.Grads(), r.scaler); err != nil {
			return Stats{}, err
		}
		r.scaler.Update(skipped)
	}
	if !skipped {
		if err := r.opt.Step(lr); err != nil {
			return Stats{}, err
		}
	}
	r.hostSt = [3]float32{r.rep.stats[0] * float32(n), r.rep.stats[1], float32(n)}
	if err := m.Device().CopyIn(r.stats, r.hostSt[:]); err != nil {
		return Stats{}, err
	}
	if err := c.AllReduce(r.stats, Sum); err != nil {
		return Stats{}, err
	}
	if err := m.Device().CopyOut(r.hostSt[:], r.stats); err != nil {
		return Stats{}, err
	}
	g := r.hostSt
	return Stats{Loss: float64(g[0]) / float64(g[2]), Correct: int(g[1]), N: int(g[2]), Skipped: skipped}, nil
}
