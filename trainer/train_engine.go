package trainer

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/loaderd/loaderd/client"
	"github.com/loaderd/loaderd/client/sample"
	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
	"github.com/loaderd/loaderd/sampler"
	"github.com/loaderd/loaderd/trainer/amp"
	"github.com/loaderd/loaderd/trainer/nn"
	"github.com/loaderd/loaderd/trainer/optim"
	"github.com/loaderd/loaderd/trainer/parallel"
	"github.com/loaderd/loaderd/trainer/tensor"
)

// stepStats is one training step over the global batch.
type stepStats struct {
	parallel.Stats
	pos  sampler.Position // the batch trained on
	wait time.Duration    // blocked waiting for it (the slowest rank in ddp)
}

// engine trains one model on K devices from batches it pulls itself.
type engine interface {
	// step fetches the next global batch and trains on it. A fetch error
	// is returned as a *fetchError: the model is then unchanged.
	step(ctx context.Context, lr float64) (stepStats, error)
	// models returns one replica per device, identical in weights.
	models() []*nn.Model
	// state returns replica 0's model and optimizer, as checkpoints hold them.
	state() (model, opt []byte, err error)
	// restore loads a checkpoint's state into every replica.
	restore(model, opt []byte) error
	// scalers returns the fp16 loss scalers (one per optimizer), or none.
	scalers() []*amp.GradScaler
	// open starts the training streams at start and returns the batches
	// per epoch.
	open(ctx context.Context, c *client.Client, cfg *TrainConfig, start sampler.Position) (int64, error)
	// openStreams returns the training streams open has opened, stream i
	// feeding device i.
	openStreams() []*client.Stream
	close()
}

// fetchError marks a failure to get a batch, before any computation.
type fetchError struct{ err error }

func (e *fetchError) Error() string { return e.err.Error() }
func (e *fetchError) Unwrap() error { return e.err }

// mlpHidden are the hidden widths of the MLP model (3072-512-256-10).
var mlpHidden = []int{512, 256}

// builder returns the module constructor for cfg's model.
func builder(cfg *TrainConfig) parallel.Builder {
	if cfg.Model == "mlp" {
		return func() (nn.Module, error) { return nn.NewMLP(nn.CIFAR, mlpHidden, 10), nil }
	}
	shape := cfg.CNN
	return func() (nn.Module, error) { return nn.NewCNN(shape) }
}

func parallelConfig(c *TrainConfig) parallel.Config {
	return parallel.Config{In: nn.CIFAR, Seed: c.Seed, Smoothing: float32(c.LabelSmoothing), SyncBN: c.SyncBN,
		Precision: c.precision(),
		SGD:       optim.SGDConfig{Momentum: c.Momentum, Nesterov: c.Nesterov, WeightDecay: c.WeightDecay}}
}

// streamConfig is rank r's training stream, from position start.
func streamConfig(c *TrainConfig, rank int, start sampler.Position) client.StreamConfig {
	w := c.world()
	return client.StreamConfig{Dataset: c.Dataset, Rank: rank, World: w, BatchSize: c.Batch / w, Seed: c.Seed,
		DropLastBatch: true, Start: start, Epochs: int64(c.Epochs) - start.Epoch, Augment: c.Augment,
		DType: sample.F32, Layout: sample.CHW, SharedMemory: c.SharedMemory, Prefetch: c.Prefetch,
		ValuesOnClient: c.ValuesOnClient, Name: fmt.Sprintf("%s-rank%d", c.Name, rank)}
}

// checkHeader makes sure a stream delivers what the models take.
func checkHeader(h *pb.StreamHeader, dataset string) error {
	s, dt := h.GetSampleShape(), h.GetDtype()
	if len(h.GetValueTable()) > 0 { // uint8 on the wire, the values applied by floats
		dt = h.GetValueDtype()
	}
	if dt != pb.DType_DTYPE_F32 || h.GetLayout() != pb.Layout_LAYOUT_CHW || len(s) != 3 ||
		s[0] != int64(nn.CIFAR.C) || s[1] != int64(nn.CIFAR.H) || s[2] != int64(nn.CIFAR.W) {
		return fmt.Errorf("trainer: dataset %q gives %v samples of %v %v; the models take 3×32×32 f32 CHW: %w",
			dataset, s, h.GetDtype(), h.GetLayout(), ErrTrainConfig)
	}
	return nil
}

// spare is a step's buffers for batches that are not already f32 in
// place: the values applied on the client, or unaligned bytes.
type spare struct {
	f []float32
	b []byte
}

// batchFloats returns b's images as f32: a view of its bytes, or, when the
// stream sends uint8 and the values' table (ValuesOnClient), the table
// applied into sp.
func batchFloats(b *client.Batch, sp *spare) ([]float32, error) {
	data := b.Data
	if b.DType == sample.U8 {
		var err error
		if sp.b, err = b.Values(sp.b); err != nil {
			return nil, fmt.Errorf("trainer: %w", err)
		}
		data = sp.b
	}
	return floats(data, &sp.f), nil
}

// floats views a batch's f32 bytes as []float32 without a copy when the
// host is little-endian and the bytes aligned (ring slots and shared-memory
// batches are), else decodes into *spare.
func floats(b []byte, spare *[]float32) []float32 {
	if len(b) == 0 {
		return nil
	}
	if littleEndian && uintptr(unsafe.Pointer(&b[0]))%4 == 0 {
		return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
	}
	n := len(b) / 4
	if cap(*spare) < n {
		*spare = make([]float32, n)
	}
	out := (*spare)[:n]
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

var littleEndian = func() bool { x := uint16(1); return *(*byte)(unsafe.Pointer(&x)) == 1 }()

// dpEngine is DataParallel fed by one stream of global batches.
type dpEngine struct {
	samples io.Writer
	dp      *parallel.DataParallel
	s       *client.Stream
	spare   spare
}

func (e *dpEngine) step(ctx context.Context, lr float64) (stepStats, error) {
	t0 := time.Now()
	b, err := e.s.Next(ctx)
	if err != nil {
		return stepStats{}, &fetchError{fmt.Errorf("trainer: training stream: %w", err)}
	}
	wait := time.Since(t0)
	if e.samples != nil {
		logSamples(e.samples, 0, b)
	}
	if batchHook != nil {
		batchHook(0, b)
	}
	x, err := batchFloats(b, &e.spare)
	var st parallel.Stats
	if err == nil {
		st, err = e.dp.Step(x, b.Labels, lr)
	}
	pos := b.Position()
	if rerr := b.Release(); err == nil && rerr != nil {
		err = rerr
	}
	return stepStats{Stats: st, pos: pos, wait: wait}, err
}

func (e *dpEngine) models() []*nn.Model {
	ms := make([]*nn.Model, e.dp.Devices())
	for i := range ms {
		ms[i] = e.dp.Model(i)
	}
	return ms
}

func (e *dpEngine) state() ([]byte, []byte, error) { return saveState(e.dp.Model(0), e.dp.Optimizer()) }

func (e *dpEngine) restore(model, opt []byte) error {
	if err := loadState(e.dp.Model(0), e.dp.Optimizer(), model, opt); err != nil {
		return err
	}
	return e.dp.Broadcast()
}

func (e *dpEngine) scalers() []*amp.GradScaler {
	if s := e.dp.Scaler(); s != nil {
		return []*amp.GradScaler{s}
	}
	return nil
}

func (e *dpEngine) openStreams() []*client.Stream {
	if e.s == nil {
		return nil
	}
	return []*client.Stream{e.s}
}

func (e *dpEngine) close() {
	if e.s != nil {
		e.s.Close()
	}
}

// ddpEngine runs one Rank per device, each on its own stream (rank r of
// world K), stepping together: every step starts a goroutine per rank.
type ddpEngine struct {
	base    int // the first rank here: 0, or this process's rank of a Group
	samples io.Writer
	ranks   []*parallel.Rank
	streams []*client.Stream
	spare   []spare
	res     []stepStats
	errs    []error
}

func (e *ddpEngine) step(ctx context.Context, lr float64) (stepStats, error) {
	var wg sync.WaitGroup
	for r := range e.ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.res[r], e.errs[r] = e.rankStep(ctx, r, lr)
		}()
	}
	wg.Wait()
	// A rank that could not fetch its batch aborted the others' collectives:
	// report its error, which says that no model changed.
	var first error
	for _, err := range e.errs {
		var fe *fetchError
		if errors.As(err, &fe) {
			return stepStats{}, err
		}
		if first == nil {
			first = err
		}
	}
	if first != nil {
		return stepStats{}, first
	}
	out := e.res[0]
	for r := range e.res {
		if e.res[r].pos != out.pos {
			return stepStats{}, fmt.Errorf("trainer: rank %d trained on %v, rank 0 on %v", r, e.res[r].pos, out.pos)
		}
		out.wait = max(out.wait, e.res[r].wait)
	}
	return out, nil
}

func (e *ddpEngine) rankStep(ctx context.Context, r int, lr float64) (stepStats, error) {
	t0 := time.Now()
	b, err := e.streams[r].Next(ctx)
	if err != nil {
		// The other ranks wait in the step's first collective: release them.
		// No rank has changed its model yet.
		err = fmt.Errorf("trainer: rank %d's training stream: %w", e.base+r, err)
		e.ranks[r].Collective().Abort(err)
		return stepStats{}, &fetchError{err}
	}
	wait := time.Since(t0)
	if e.samples != nil {
		logSamples(e.samples, e.base+r, b)
	}
	if batchHook != nil {
		batchHook(e.base+r, b)
	}
	x, err := batchFloats(b, &e.spare[r])
	var st parallel.Stats
	if err == nil {
		st, err = e.ranks[r].Step(x, b.Labels, lr)
	}
	pos := b.Position()
	if rerr := b.Release(); err == nil && rerr != nil {
		err = rerr
	}
	return stepStats{Stats: st, pos: pos, wait: wait}, err
}

func (e *ddpEngine) models() []*nn.Model {
	ms := make([]*nn.Model, len(e.ranks))
	for i, r := range e.ranks {
		ms[i] = r.Model()
	}
	return ms
}

func (e *ddpEngine) state() ([]byte, []byte, error) {
	return saveState(e.ranks[0].Model(), e.ranks[0].Optimizer())
}

func (e *ddpEngine) restore(model, opt []byte) error {
	for _, r := range e.ranks {
		if err := loadState(r.Model(), r.Optimizer(), model, opt); err != nil {
			return err
		}
	}
	return nil
}

func (e *ddpEngine) scalers() []*amp.GradScaler {
	var out []*amp.GradScaler
	for _, r := range e.ranks {
		if s := r.Scaler(); s != nil {
			out = append(out, s)
		}
	}
	return out
}

func (e *ddpEngine) openStreams() []*client.Stream { return e.streams }

func (e *ddpEngine) close() {
	for _, s := range e.streams {
		s.Close()
	}
}

func saveState(m *nn.Model, o *optim.SGD) ([]byte, []byte, error) {
	var mb, ob bytes.Buffer
	if err := m.Save(&mb); err != nil {
		return nil, nil, err
	}
	if err := o.Save(&ob); err != nil {
		return nil, nil, err
	}
	return mb.Bytes(), ob.Bytes(), nil
}

func loadState(m *nn.Model, o *optim.SGD, model, opt []byte) error {
	if err := m.Load(bytes.NewReader(model)); err != nil {
		return fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	if err := o.Load(bytes.NewReader(opt)); err != nil {
		return fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	return nil
}

// newEngine builds the replicas on devs; open starts their streams.
func newEngine(cfg *TrainConfig, devs []tensor.Device) (engine, error) {
	build, pc := builder(cfg), parallelConfig(cfg)
	var samples io.Writer
	if cfg.Samples != nil {
		samples = &lockedWriter{w: cfg.Samples} // ddp ranks write from their goroutines
	}
	if cfg.Mode == "dp" {
		dp, err := parallel.NewDataParallel(devs, build, pc)
		if err != nil {
			return nil, err
		}
		return &dpEngine{dp: dp, samples: samples}, nil
	}
	var ranks []*parallel.Rank
	base := 0
	if cfg.Group != nil { // one rank of a multi-process group
		r, err := parallel.NewRank(devs[0], build, cfg.Group, pc)
		if err != nil {
			return nil, err
		}
		ranks, base = []*parallel.Rank{r}, cfg.Group.Rank()
	} else {
		var err error
		if ranks, err = parallel.NewDDP(devs, build, pc); err != nil {
			return nil, err
		}
	}
	k := len(ranks)
	return &ddpEngine{base: base, samples: samples, ranks: ranks, spare: make([]spare, k),
		res: make([]stepStats, k), errs: make([]error, k)}, nil
}

func (e *dpEngine) open(ctx context.Context, c *client.Client, cfg *TrainConfig, start sampler.Position) (int64, error) {
	s, err := c.Open(ctx, streamConfig(cfg, 0, start))
	if err != nil {
		return 0, err
	}
	e.s = s
	if err := checkHeader(s.Header(), cfg.Dataset); err != nil {
		return 0, err
	}
	return s.Header().GetBatchesPerEpoch(), nil
}

func (e *ddpEngine) open(ctx context.Context, c *client.Client, cfg *TrainConfig, start sampler.Position) (int64, error) {
	for r := range e.ranks {
		s, err := c.Open(ctx, streamConfig(cfg, e.base+r, start))
		if err != nil {
			return 0, err
		}
		e.streams = append(e.streams, s)
		if err := checkHeader(s.Header(), cfg.Dataset); err != nil {
			return 0, err
		}
	}
	bpe := e.streams[0].Header().GetBatchesPerEpoch()
	for r, s := range e.streams {
		if s.Header().GetBatchesPerEpoch() != bpe {
			return 0, fmt.Errorf("trainer: rank %d has %d batches per epoch, rank %d %d", e.base+r,
				s.Header().GetBatchesPerEpoch(), e.base, bpe)
		}
	}
	return bpe, nil
}

// batchHook, set by tests only, sees every batch before it is trained on.
var batchHook func(rank int, b *client.Batch)

// logSamples writes one line naming the dataset indices of rank's batch.
func logSamples(w io.Writer, rank int, b *client.Batch) {
	var sb strings.Builder
	fmt.Fprintf(&sb, "epoch %d batch %d rank %d:", b.Epoch, b.Index, rank)
	for _, i := range b.Indices {
		sb.WriteByte(' ')
		sb.WriteString(strconv.FormatInt(i, 10))
	}
	sb.WriteByte('\n')
	io.WriteString(w, sb.String())
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
