package loader

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/client/wire"
	"github.com/loaderd/loaderd/pinned"
	"github.com/loaderd/loaderd/sampler"
)

// Config describes one stream of batches.
type Config struct {
	Source   Source
	Pipeline *augment.Pipeline // built for Source.Spec()

	// The sampler: this stream is rank Rank of World.
	Rank, World int
	Seed        uint64 // keys both the shuffle and the augmentation
	Shuffle     bool
	DropLast    bool // drop the epoch's tail so ranks divide evenly, instead of padding

	BatchSize     int
	DropLastBatch bool // drop the rank's last, incomplete batch of each epoch

	// Start is the first batch to deliver. A Start.Offset (an elastic
	// resume: see docs/RESUME.md) plans the rest of Start.Epoch from that
	// entry of its order on, over this stream's world; 0 <= Offset <= N.
	Start  sampler.Position
	Epochs int64 // the stream ends before this epoch (absolute, so a resumed stream ends where the original would); 0 is endless

	InFlight int // batches planned ahead, and pinned slots held; default 4
	// HoldUntilWiden plans no batch until Widen: a daemon starts a stream
	// whose client has not yet answered its header this way, so that a
	// stream opened and dropped at once (a flood's) costs the workers
	// nothing.
	HoldUntilWiden bool
	Pinned         *pinned.Pool // slots come from here when set; else the Loader maps its own
	WithParams     bool         // record each sample's augmentation parameters

	// OnDemand makes only the batches named with Want, in the order named,
	// each by its number in the stream from Start (Numbering); Next then
	// waits for a Want rather than ending. A pool of daemons serves one
	// stream this way, each daemon the batches its client asks of it.
	OnDemand bool

	// Tenant groups streams for the workers' turns (any comparable value;
	// the daemon uses the client's connection): workers serve tenants in
	// turn, then a tenant's streams in turn, so opening many streams does
	// not win more of the workers. nil: the stream is a tenant of its own.
	Tenant any

	// OnError is what the stream does with a sample its source cannot
	// read (a corrupt image, a bad label): FailOnError, the default, fails
	// the stream; SkipOnError delivers the next readable sample in its
	// place (Batch.Indices names it), counts it and calls OnSkip.
	OnError  ErrorPolicy
	MaxSkips int64           // SkipOnError fails the stream after this many skips; 0: no bound
	OnSkip   func(SkipEvent) // the metric and the log line; called from workers, must be quick
}

// DefaultInFlight is the number of batches a Loader keeps in flight.
const DefaultInFlight = 4

// MaxBatchSize bounds a batch, so that a typo cannot map gigabytes: the
// most the daemon's Open accepts, since a stream the wire refuses is not
// worth building in-process either.
const MaxBatchSize = wire.MaxBatchSize

// CheckBatchSize reports a batch size outside 1..MaxBatchSize, in words
// that list among other problems. New checks Config.BatchSize with it; the
// daemon checks an Open's before it sizes the stream's memory.
func CheckBatchSize(n int) error {
	if n <= 0 || n > MaxBatchSize {
		return fmt.Errorf("batch size %d (want 1..%d)", n, MaxBatchSize)
	}
	return nil
}

// Loader delivers one stream's batches in order. Next and Release may be
// called from different goroutines; Next itself must not be called
// concurrently.
type Loader struct {
	pool     *Pool
	cfg      Config
	src      Source
	sized    SizedSource // src, when its images vary in size
	pf       Prefetcher  // src, when it prefetches
	fields   FieldSource // src, when it has extra fields or label sets
	pipe     *augment.Pipeline
	dist     sampler.Distributed
	outBytes int
	perEpoch int64 // batches per epoch
	skip     Skipper
	slots    *pinned.Pool
	ownSlots bool
	batches  []*Batch

	mu        sync.Mutex
	pos       sampler.Position // next batch to plan
	plan      sampler.Epoch
	planEpoch int64 // epoch that plan covers, from planOff
	planOff   int64
	posEnd    int64 // batches in pos's epoch from pos.Offset
	seq       int64
	exhausted bool
	window    int               // batches that may be planned and not yet released: 0 held, else InFlight
	num       sampler.Numbering // batch numbers, for OnDemand
	wants     []int64           // OnDemand: numbers wanted and not yet planned, in order
	err       error             // sticky: the first failure, or ErrClosed
	order     []*Batch          // planned, not yet delivered, in stream order (ring)
	ohead     int
	olen      int
	idle      []*Batch
	wake      chan struct{}
	closing   chan struct{} // closed by Close, to wake a waiting Next

	// Work queue, guarded by pool.mu.
	queue  []*Batch
	qhead  int
	qlen   int
	active bool
	busy   sync.WaitGroup // chunks taken by workers and not finished
}

// New starts a stream on pool. Every problem with cfg is reported at once.
func New(pool *Pool, cfg Config) (*Loader, error) {
	if cfg.InFlight == 0 {
		cfg.InFlight = DefaultInFlight
	}
	var errs []string
	if cfg.Source == nil {
		errs = append(errs, "no source")
	}
	if cfg.Pipeline == nil {
		errs = append(errs, "no pipeline")
	}
	if err := CheckBatchSize(cfg.BatchSize); err != nil {
		errs = append(errs, err.Error())
	}
	if cfg.InFlight < 1 || cfg.InFlight > 64 {
		errs = append(errs, fmt.Sprintf("in-flight %d (want 1..64)", cfg.InFlight))
	}
	if cfg.Start.Epoch < 0 || cfg.Start.Batch < 0 || cfg.Start.Offset < 0 {
		errs = append(errs, fmt.Sprintf("start position %+v is negative", cfg.Start))
	}
	if cfg.OnError != FailOnError && cfg.OnError != SkipOnError || cfg.MaxSkips < 0 {
		errs = append(errs, fmt.Sprintf("error policy %v with max skips %d", cfg.OnError, cfg.MaxSkips))
	}
	if cfg.Epochs < 0 || (cfg.Epochs > 0 && cfg.Start.Epoch >= cfg.Epochs) {
		errs = append(errs, fmt.Sprintf("start epoch %d is not before the end epoch %d", cfg.Start.Epoch, cfg.Epochs))
	}
	var dist sampler.Distributed
	if cfg.Source != nil && cfg.Pipeline != nil {
		if in := cfg.Pipeline.In(); in != cfg.Source.Spec() {
			msg := fmt.Sprintf("pipeline takes %v, source gives %v", in, cfg.Source.Spec())
			if varying(cfg.Source.Spec()) {
				msg += " (images of varying size): " + VaryingSizeFix
			}
			errs = append(errs, msg)
		} else if s := cfg.Source.Spec(); s.H == 0 && s.W == 0 {
			// Images of varying size: the source must say each one's size,
			// and the chain must open with resize or crop ops.
			if !Caps(cfg.Source).Has(CapSized) {
				errs = append(errs, fmt.Sprintf("source %s gives images of varying size but no loader.SizedSource", cfg.Source))
			}
			if !cfg.Pipeline.Resamples() {
				errs = append(errs, fmt.Sprintf("source %s gives images of varying size and the pipeline %s takes one size: %s", cfg.Source, cfg.Pipeline, VaryingSizeFix))
			}
		}
		dist = sampler.Distributed{N: cfg.Source.Len(), Rank: cfg.Rank, World: cfg.World,
			Seed: cfg.Seed, Shuffle: cfg.Shuffle, DropLast: cfg.DropLast}
		if so, ok := As[ShardOrderer](cfg.Source); ok {
			dist.Shards = so.ShardOrder()
		}
		dist.Order = OrderOf(cfg.Source)
		dist.Weights = WeightsOf(cfg.Source)
		if err := dist.Validate(); err != nil {
			errs = append(errs, strings.TrimPrefix(err.Error(), "sampler: "))
		}
		if cfg.Start.Offset > dist.EpochLen() {
			errs = append(errs, fmt.Sprintf("start offset %d is past the dataset's %d samples", cfg.Start.Offset, dist.EpochLen()))
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("loader: invalid config: %s", strings.Join(errs, "; "))
	}
	l := &Loader{pool: pool, cfg: cfg, src: cfg.Source, pipe: cfg.Pipeline, dist: dist,
		outBytes: cfg.Pipeline.Out().Bytes(), pos: cfg.Start, planEpoch: -1,
		order: make([]*Batch, cfg.InFlight), queue: make([]*Batch, cfg.InFlight),
		wake: make(chan struct{}, 1), closing: make(chan struct{}),
		skip: Skipper{Policy: cfg.OnError, MaxSkips: cfg.MaxSkips, OnSkip: cfg.OnSkip}}
	l.window = cfg.InFlight
	if cfg.HoldUntilWiden {
		l.window = 0
	}
	l.sized, _ = As[SizedSource](cfg.Source)
	l.pf, _ = As[Prefetcher](cfg.Source)
	if fs, ok := As[FieldSource](cfg.Source); ok && (len(fs.FieldNames()) > 0 || fs.MultiLabel()) {
		l.fields = fs
		if fs.MultiLabel() && cfg.Pipeline.Mixer() != nil {
			return nil, fmt.Errorf("loader: invalid config: source %s is multi-label and the pipeline %s mixes samples (mixup, cutmix): not supported together", cfg.Source, cfg.Pipeline)
		}
	}
	l.perEpoch = sampler.Batches(dist.NumSamples(), cfg.BatchSize, cfg.DropLastBatch)
	if l.perEpoch == 0 {
		return nil, fmt.Errorf("loader: invalid config: rank %d gets %d samples per epoch, no batch of %d", cfg.Rank, dist.NumSamples(), cfg.BatchSize)
	}
	if n := l.batchesAt(cfg.Start); cfg.Start.Batch >= n && (n > 0 || cfg.Start.Batch > 0) {
		return nil, fmt.Errorf("loader: invalid config: start batch %d, but the epoch has %d batches (from offset %d)",
			cfg.Start.Batch, n, cfg.Start.Offset)
	} else if n == 0 {
		// Nothing of the epoch is left for this world (an offset at N, or
		// only a dropped tail after it): start at the next epoch.
		l.pos = sampler.Position{Epoch: cfg.Start.Epoch + 1}
		l.exhausted = cfg.Epochs > 0 && l.pos.Epoch >= cfg.Epochs
	}
	l.num = sampler.NewNumbering(cfg.Start, l.batchesAt(cfg.Start), l.perEpoch, cfg.Epochs)
	if cfg.OnDemand {
		l.exhausted = false // it waits for wants instead
	}
	if err := l.setupSlots(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *Loader) setupSlots() error {
	slotSize := l.cfg.BatchSize * l.outBytes
	l.slots = l.cfg.Pinned
	if l.slots == nil {
		p, err := pinned.New(pinned.Config{SlotSize: slotSize, Slots: l.cfg.InFlight, Name: "loader"})
		if err != nil {
			return fmt.Errorf("loader: %w", err)
		}
		l.slots, l.ownSlots = p, true
	}
	for range l.cfg.InFlight {
		s, ok := l.slots.TryLease()
		if !ok {
			l.releaseSlots()
			return fmt.Errorf("loader: pinned pool has fewer than %d free slots", l.cfg.InFlight)
		}
		if len(s.Bytes()) < slotSize {
			s.Release()
			l.releaseSlots()
			return fmt.Errorf("loader: pinned slots of %d bytes, a batch needs %d", len(s.Bytes()), slotSize)
		}
		bs := l.cfg.BatchSize
		b := &Batch{l: l, Slot: s, Spec: l.pipe.Out(), idx: make([]int64, bs), labels: make([]int32, bs),
			done: make(chan struct{}, 1)}
		if l.cfg.WithParams {
			b.params = make([]sample.Params, bs)
		}
		if l.dist.Shuffle && l.dist.Weights != nil {
			b.keys = make([]int64, bs)
		}
		if l.pipe.Mixer() != nil {
			b.mixTmp = make([]byte, l.outBytes)
		}
		if l.fields != nil {
			b.fields = newBatchFields(len(l.fields.FieldNames()), bs, l.fields.MultiLabel())
		}
		l.batches = append(l.batches, b)
		l.idle = append(l.idle, b)
	}
	return nil
}

func (l *Loader) releaseSlots() {
	for _, b := range l.batches {
		b.Slot.Release()
	}
	l.batches, l.idle = nil, nil
	if l.ownSlots {
		l.slots.Close()
	}
}

// BatchesPerEpoch returns how many batches this rank gets each whole
// epoch (a start epoch resumed at an offset has BatchesFrom).
func (l *Loader) BatchesPerEpoch() int64 { return l.perEpoch }

// After returns the position of the batch that follows b in an
// uninterrupted stream: where a stream resumes once b is consumed.
func (l *Loader) After(b *Batch) sampler.Position {
	p := sampler.Position{Epoch: b.Epoch, Batch: b.Index, Offset: b.Offset}
	return p.Next(l.batchesAt(p))
}

// batchesAt returns how many batches this rank gets in p's epoch from
// p.Offset on.
func (l *Loader) batchesAt(p sampler.Position) int64 {
	if p.Offset == 0 {
		return l.perEpoch
	}
	return l.dist.BatchesFrom(p.Offset, l.cfg.BatchSize, l.cfg.DropLastBatch)
}

// Numbering returns how the stream numbers its batches from Start.
func (l *Loader) Numbering() sampler.Numbering { return l.num }

// Want asks an OnDemand stream for batch number k (see Numbering) after
// those already wanted. It fails for a stream that is not on demand and
// for a number past the stream's end.
func (l *Loader) Want(k int64) error {
	if !l.cfg.OnDemand {
		return errors.New("loader: Want on a stream that is not on demand")
	}
	if _, ok := l.num.At(k); !ok {
		return fmt.Errorf("loader: batch number %d is past the stream's %d batches", k, l.num.Len())
	}
	l.mu.Lock()
	l.wants = append(l.wants, k)
	l.planAndWake()
	return nil
}

// planAndWake plans what it can, unlocks l.mu (held on entry), and wakes a
// Next waiting for a batch to plan.
func (l *Loader) planAndWake() {
	if l.err == nil {
		l.planLocked()
	}
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Widen lets a stream opened with HoldUntilWiden plan InFlight batches from
// now on; it may be called more than once.
func (l *Loader) Widen() {
	l.mu.Lock()
	if l.window == l.cfg.InFlight {
		l.mu.Unlock()
		return
	}
	l.window = l.cfg.InFlight
	l.planAndWake()
}

// Skipped returns the number of samples replaced under SkipOnError.
func (l *Loader) Skipped() int64 { return l.skip.Skipped() }

// Sampler returns the stream's sampler.
func (l *Loader) Sampler() sampler.Distributed { return l.dist }

// Next returns the next batch in order, waiting for the workers to fill it.
// It returns io.EOF after the last epoch, and the first sample error for
// good: a failed stream stays failed.
func (l *Loader) Next(ctx context.Context) (*Batch, error) {
	l.mu.Lock()
	for {
		if l.err != nil {
			err := l.err
			l.mu.Unlock()
			return nil, err
		}
		l.planLocked()
		if l.olen > 0 {
			break
		}
		if l.exhausted {
			l.mu.Unlock()
			return nil, io.EOF
		}
		// Every batch is held by the consumer: wait for a Release.
		l.mu.Unlock()
		select {
		case <-l.wake:
		case <-l.closing:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		l.mu.Lock()
	}
	b := l.order[l.ohead]
	l.mu.Unlock()

	select {
	case <-b.done:
	case <-l.closing:
		return nil, fmt.Errorf("loader: %w", ErrClosed)
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-l.pool.done:
		return nil, fmt.Errorf("loader: worker pool: %w", ErrClosed)
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	l.order[l.ohead] = nil
	l.ohead = (l.ohead + 1) % len(l.order)
	l.olen--
	if b.err != nil {
		l.err = b.err
		l.idle = append(l.idle, b)
		return nil, b.err
	}
	b.held = true
	return b, nil
}

// Release hands b back for reuse; the next batch is planned at once.
func (l *Loader) Release(b *Batch) error {
	if b == nil || b.l != l {
		return errors.New("loader: release of a batch from another loader")
	}
	l.mu.Lock()
	if !b.held {
		l.mu.Unlock()
		return errors.New("loader: batch released twice")
	}
	b.held = false
	l.idle = append(l.idle, b)
	l.planAndWake()
	return nil
}

// planLocked assigns every idle batch its indices and queues it: the next
// positions in order, or on demand the wanted ones.
func (l *Loader) planLocked() {
	for len(l.idle) > 0 && l.cfg.InFlight-len(l.idle) < l.window {
		if l.cfg.OnDemand {
			if len(l.wants) == 0 {
				return
			}
			k := l.wants[0]
			l.wants = l.wants[1:]
			p, _ := l.num.At(k) // Want checked it
			l.planAt(p, k)
			continue
		}
		if l.exhausted {
			return
		}
		l.planAt(l.pos, l.seq)
		l.seq++
		l.advanceLocked()
	}
}

// planAt plans an idle batch at position p as stream sequence seq.
func (l *Loader) planAt(p sampler.Position, seq int64) {
	b := l.idle[len(l.idle)-1]
	l.idle = l.idle[:len(l.idle)-1]
	if l.planEpoch != p.Epoch || l.planOff != p.Offset {
		l.plan = l.dist.EpochFrom(p.Epoch, p.Offset)
		l.planEpoch, l.planOff = p.Epoch, p.Offset
		l.posEnd = l.batchesAt(p)
	}
	bs := int64(l.cfg.BatchSize)
	start := p.Batch * bs
	n := min(bs, l.plan.Len()-start)
	b.Indices = l.plan.Fill(b.idx[:n], start)
	if b.keys != nil && l.plan.Draws() {
		// A sample drawn twice in an epoch is augmented twice, each draw
		// keyed by its own entry of the draw list (negative, so that no
		// key is also a dataset index's).
		for i := range b.Indices {
			b.keys[i] = -1 - l.plan.Entry(start+int64(i))
		}
	}
	if l.pf != nil {
		l.pf.Prefetch(b.Indices)
	}
	b.Labels = b.labels[:n]
	if b.params != nil {
		b.Params = b.params[:n]
	}
	b.Data = b.Slot.Bytes()[:int(n)*l.outBytes]
	b.Seq, b.Epoch, b.Index, b.Offset = seq, p.Epoch, p.Batch, p.Offset
	b.assigned, b.err, b.Mix = 0, nil, sample.Mix{}
	b.busyNs.Store(0)
	b.pending.Store(int32(n))
	l.order[(l.ohead+l.olen)%len(l.order)] = b
	l.olen++
	l.pool.submit(b)
}

func (l *Loader) advanceLocked() {
	l.pos.Batch++
	if l.pos.Batch < l.posEnd {
		return
	}
	l.pos = sampler.Position{Epoch: l.pos.Epoch + 1}
	if l.cfg.Epochs > 0 && l.pos.Epoch >= l.cfg.Epochs {
		l.exhausted = true
	}
}

// Close stops the stream: queued work is dropped, running chunks finish,
// and the pinned slots are released. Batches still held become invalid.
func (l *Loader) Close() error {
	l.mu.Lock()
	if l.isClosed() {
		l.mu.Unlock()
		return nil
	}
	l.err = fmt.Errorf("loader: %w", ErrClosed)
	l.exhausted = true
	close(l.closing)
	l.mu.Unlock()
	l.pool.withdraw(l)
	l.busy.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.releaseSlots()
	return nil
}

func (l *Loader) isClosed() bool {
	select {
	case <-l.closing:
		return true
	default:
		return false
	}
}
