package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loaderd/loaderd/pinned"
	"github.com/loaderd/loaderd/sampler"
)

// poolState is a pool stream's scheduler: which daemon owes which batch
// numbers, the batches received ahead of their turn, and the next number
// to give the caller. Only the scheduler goroutine touches it, but for
// mu's fields.
type poolState struct {
	target   *poolTarget
	num      sampler.Numbering
	total    int64 // batches in the stream; -1 endless
	members  []*member
	arrivals chan poolArrival
	opened   chan poolOpened
	resolved chan []string

	nextNum  int64            // first number never wanted
	span     int64            // how far past deliver new numbers are wanted
	lost     []int64          // numbers owed by daemons that went down, to ask again (sorted)
	got      map[int64]*Batch // received ahead of their turn
	deliver  int64            // the next number the caller gets
	hedged   map[int64]bool   // numbers also wanted of a second daemon
	allDown  bool             // AllDown reported and no daemon up since
	failed   error            // what ends the stream for every daemon (streamFailed)
	failedAt int64            // the number it fails at: the batches before it come first
	waiting  time.Time        // when the caller's next batch was first owed

	mu        sync.Mutex // guards what Pool reads
	view      []PoolMember
	published time.Time // when view was made: at most once a poolTick, and at the end

	recv     sync.WaitGroup // member receivers, which write into the ring
	lastWait atomic.Int64   // the caller's last wait in Next, in ns
}

// openPool opens a stream over the pool: every daemon it resolves to is
// asked for a stream at once; those that answer must agree on the
// dataset's fingerprint and the stream's shape, else Open fails naming
// them. Daemons that do not answer yet are tried again in the background.
func (c *Client) openPool(ctx context.Context, cfg StreamConfig) (*Stream, error) {
	if cfg.SharedMemory {
		return nil, errors.New("client: shared memory needs one daemon on this host, not a pool")
	}
	cfg.Pool.defaults()
	s := &Stream{c: c, cfg: cfg, next: cfg.Start, opened: time.Now(), done: make(chan struct{})}
	if cfg.Epochs > 0 {
		s.endEpoch = cfg.Start.Epoch + cfg.Epochs
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, s.cancel) // Open's ctx bounds the opening only
	addrs, err := c.pool.resolve(s.ctx)
	if err != nil {
		stop()
		s.cancel()
		return nil, err
	}
	p := &poolState{target: c.pool, arrivals: make(chan poolArrival), opened: make(chan poolOpened),
		resolved: make(chan []string, 1), got: map[int64]*Batch{}, hedged: map[int64]bool{}}
	s.pool = p
	results := make([]poolOpened, len(addrs))
	var wg sync.WaitGroup
	for i, a := range addrs {
		wg.Go(func() { results[i] = s.dialMember(a); results[i].m = &member{addr: a} })
	}
	wg.Wait()
	if !stop() || s.ctx.Err() != nil {
		s.closeOpened(results)
		s.cancel()
		return nil, fmt.Errorf("client: open %q on pool %s: %w", cfg.Dataset, c.pool, ctx.Err())
	}
	if err := s.checkPool(results); err != nil {
		s.closeOpened(results)
		s.cancel()
		return nil, err
	}
	h := s.header
	s.stats.Reconnects = 0
	first := h.GetBatchesPerEpoch()
	if cfg.Start.Offset != 0 {
		first = s.sampler(h).BatchesFrom(cfg.Start.Offset, int(h.GetBatchSize()), cfg.DropLastBatch)
	}
	p.num = sampler.NewNumbering(cfg.Start, first, h.GetBatchesPerEpoch(), s.endEpoch)
	p.total = p.num.Len()
	if p.total == 0 {
		s.closeOpened(results)
		s.cancel()
		return nil, fmt.Errorf("client: open %q: the stream has no batches", cfg.Dataset)
	}
	// Buffers: a window per daemon, the caller's prefetch beside it, and a
	// window more that new numbers never take, for asking a lost or slow
	// daemon's batches of another while the rest wait for them in order.
	slots := cfg.Prefetch + cfg.Pool.Window*(max(len(addrs), 2)+1)
	p.span = int64(slots - cfg.Prefetch - cfg.Pool.Window)
	size := int(h.GetBatchSize()) * int(h.GetSampleBytes())
	ring, err := pinned.New(pinned.Config{SlotSize: size, Slots: slots, Name: "client-pool-ring"})
	if err != nil {
		s.closeOpened(results)
		s.cancel()
		return nil, fmt.Errorf("client: ring: %w", err)
	}
	s.ring = ring
	s.free, s.ready = make(chan *Batch, slots), make(chan *Batch, slots)
	for range slots {
		b := &Batch{s: s}
		slot, _ := ring.TryLease()
		b.buf = slot.Bytes()[:size]
		b.w.Indices, b.w.Labels = make([]int64, 0, h.GetBatchSize()), make([]int32, 0, h.GetBatchSize())
		s.free <- b
	}
	for _, r := range results {
		p.members = append(p.members, r.m)
		if r.err == nil {
			s.memberUp(r)
		} else {
			r.m.lastErr, r.m.backoff, r.m.retryAt = r.err, 100*time.Millisecond, time.Now()
		}
	}
	go s.schedule()
	return s, nil
}

// checkPool picks the reference header and refuses a pool whose daemons
// disagree, naming them.
func (s *Stream) checkPool(rs []poolOpened) error {
	var failed []string
	byPrint := map[string][]string{}
	for _, r := range rs {
		if r.err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", r.m.addr, r.err))
			continue
		}
		byPrint[r.h.GetFingerprint()] = append(byPrint[r.h.GetFingerprint()], r.m.addr)
		if s.header == nil {
			s.header = r.h
		}
	}
	if s.header == nil {
		return fmt.Errorf("client: open %q: no daemon of pool %s answered: %s", s.cfg.Dataset, s.c.pool, strings.Join(failed, "; "))
	}
	if none := byPrint[""]; len(none) > 0 {
		return fmt.Errorf("client: open %q on pool %s: %s: %w", s.cfg.Dataset, s.c.pool, strings.Join(none, ", "), errNoFingerprint)
	}
	if len(byPrint) > 1 {
		var groups []string
		for fp, addrs := range byPrint {
			groups = append(groups, fmt.Sprintf("%s serve %s", strings.Join(addrs, ", "), fp))
		}
		sort.Strings(groups)
		return fmt.Errorf("client: open %q: the daemons of pool %s do not serve the same dataset: %s", s.cfg.Dataset, s.c.pool, strings.Join(groups, "; "))
	}
	for _, r := range rs {
		if r.err == nil {
			if err := sameStream(s.header, r.h); err != nil {
				return fmt.Errorf("client: open %q: daemon %s: %w", s.cfg.Dataset, r.m.addr, err)
			}
		}
	}
	return nil
}

func (s *Stream) closeOpened(rs []poolOpened) {
	for _, r := range rs {
		if r.err == nil {
			r.cancel()
			r.conn.Close()
		}
	}
}

// memberUp starts using an opened stream of r.m.
func (s *Stream) memberUp(r poolOpened) {
	m := r.m
	m.sendMu.Lock()
	m.gen++
	m.gs = r.gs
	gen := m.gen
	m.sendMu.Unlock()
	m.conn, m.cancel, m.up, m.backoff, m.lastErr = r.conn, r.cancel, true, 0, nil
	m.svc = 0 // measured afresh: it may come back faster or slower
	m.bufs = make(chan *Batch, s.cfg.Pool.Window*2)
	m.connects++
	if m.connects > 1 {
		s.mu.Lock()
		s.stats.Reconnects++
		s.mu.Unlock()
	}
	s.pool.allDown = false
	s.pool.recv.Go(func() { s.receiveMember(r.ctx, m, gen, r.gs, m.bufs) })
	go s.watchMember(r.ctx, m, gen, r.conn)
	s.cfg.Pool.OnEvent(PoolEvent{Kind: DaemonUp, Addr: m.addr})
}

// memberDown drops m's stream and puts what it owed back to be asked of
// the others.
func (s *Stream) memberDown(m *member, err error) {
	if !m.up {
		return
	}
	p := s.pool
	m.sendMu.Lock()
	m.gs = nil
	m.sendMu.Unlock()
	m.cancel()
	m.conn.Close()
	m.up, m.lastErr = false, err
	moved := 0
	for _, k := range m.wanted {
		if k >= p.deliver && p.got[k] == nil && !slices.Contains(p.lost, k) {
			p.lost = append(p.lost, k)
			moved++
		}
	}
	slices.Sort(p.lost)
	m.wanted = nil
	for drained := false; !drained; { // buffers its receiver did not take
		select {
		case b := <-m.bufs:
			s.free <- b
		default:
			drained = true
		}
	}
	m.backoff = max(100*time.Millisecond, min(2*m.backoff, 2*time.Second))
	m.retryAt = time.Now().Add(m.backoff)
	s.cfg.Pool.OnEvent(PoolEvent{Kind: DaemonDown, Addr: m.addr, Err: err, Moved: moved})
}
