package client

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
	"github.com/loaderd/loaderd/sampler"
)

// The scheduler's clock: how often it looks for silent daemons, slow
// batches and daemons to reconnect while work is owed.
const poolTick = 50 * time.Millisecond

// schedule runs a pool stream: it wants each batch number of one daemon,
// the least loaded for its pace, puts batches back in order for the
// caller, moves what a lost daemon owed to the others, and asks a second
// daemon for the caller's next batch when its first is slow.
func (s *Stream) schedule() {
	p := s.pool
	defer s.endPool()
	resolve := time.NewTicker(s.cfg.Pool.Resolve)
	defer resolve.Stop()
	tick := time.NewTimer(poolTick)
	defer tick.Stop()
	var spare []*Batch
	take := func() *Batch {
		if n := len(spare); n > 0 {
			b := spare[n-1]
			spare = spare[:n-1]
			return b
		}
		select {
		case b := <-s.free:
			return b
		default:
			return nil
		}
	}
	p.waiting = time.Now()
	for {
		if p.failed != nil && p.deliver >= p.failedAt {
			s.err = p.failed
			return
		}
		s.assign(take, func(b *Batch) { spare = append(spare, b) })
		if p.total >= 0 && p.deliver >= p.total {
			s.err = io.EOF
			return
		}
		s.housekeep(take, func(b *Batch) { spare = append(spare, b) })
		if time.Since(p.published) >= poolTick { // a report, not a per-batch copy
			s.publish()
		}
		var free chan *Batch // wait for a buffer only when one would be used
		if len(spare) == 0 && s.canAssign() {
			free = s.free
		}
		tick.Reset(poolTick)
		select {
		case a := <-p.arrivals:
			if b := s.onArrival(a); b != nil {
				spare = append(spare, b)
			}
		case r := <-p.opened:
			s.onOpened(r)
		case addrs := <-p.resolved:
			s.onResolved(addrs)
		case b := <-free:
			spare = append(spare, b)
		case <-tick.C:
		case <-resolve.C:
			s.resolveAgain()
		case <-s.ctx.Done():
			s.err = fmt.Errorf("client: stream closed: %w", s.ctx.Err())
			return
		}
	}
}

// streamFailed reports whether a daemon's error ends the stream rather
// than the daemon's part in it: a sample that cannot be read (DATA_LOSS)
// cannot be read by any daemon of a pool that serves the same bytes, and
// a refused want or a broken contract is a bug to report, not to retry.
// Anything else (a daemon gone, stopping, overloaded, or refusing this
// client) is the daemon's, and its batches go to the others.
func streamFailed(err error) bool {
	switch status.Code(err) {
	case codes.DataLoss, codes.InvalidArgument, codes.Internal, codes.FailedPrecondition, codes.OutOfRange, codes.Unimplemented:
		return true
	}
	return false
}

// nextWanted is the number to want next: one a lost daemon owed, else
// the first never wanted; false when every number is wanted.
func (p *poolState) nextWanted() (int64, bool) {
	k := p.nextNum
	if len(p.lost) > 0 {
		k = p.lost[0]
	} else if p.total >= 0 && k >= p.total || k >= p.deliver+p.span {
		return 0, false
	}
	if p.failed != nil && k >= p.failedAt {
		return 0, false // the stream ends there
	}
	return k, true
}

// staleAfter is how long a daemon's batch time is trusted without a batch
// asked of it: past it the daemon counts as unmeasured, and is asked
// first, so one the trainer's pace left idle, or one that came back, is
// measured again (and found hung, if it is).
const staleAfter = time.Second

// pick returns the daemon expected to deliver one more batch soonest, among
// those up with room in their window and not m0; nil if none.
func (s *Stream) pick(m0 *member) *member {
	var best *member
	var bestAt time.Duration
	now := time.Now()
	for _, m := range s.pool.members {
		if !m.up || m.removed || m == m0 || len(m.wanted) >= s.cfg.Pool.Window {
			continue
		}
		// A daemon not yet measured goes first: that is how it gets measured.
		svc := m.svc
		if now.Sub(m.asked) > staleAfter {
			svc = 0
		}
		at := time.Duration(len(m.wanted)+1) * svc
		if best == nil || at < bestAt || (at == bestAt && len(m.wanted) < len(best.wanted)) {
			best, bestAt = m, at
		}
	}
	return best
}

func (s *Stream) canAssign() bool {
	_, ok := s.pool.nextWanted()
	return ok && s.pick(nil) != nil
}

// assign wants numbers of daemons while there are numbers, room and
// buffers.
func (s *Stream) assign(take func() *Batch, put func(*Batch)) {
	p := s.pool
	for {
		k, ok := p.nextWanted()
		if !ok {
			return
		}
		m := s.pick(nil)
		if m == nil {
			return
		}
		b := take()
		if b == nil {
			return
		}
		if err := s.want(m, k, b); err != nil {
			put(b)
			s.memberDown(m, err)
			continue
		}
		if len(p.lost) > 0 && p.lost[0] == k {
			p.lost = p.lost[1:]
		} else {
			p.nextNum++
		}
	}
}

// want asks m for batch number k, into buffer b.
func (s *Stream) want(m *member, k int64, b *Batch) error {
	err := m.send(m.gen, &pb.StreamRequest{Msg: &pb.StreamRequest_Want{Want: &pb.Want{Batches: []uint64{uint64(k)}}}})
	if err != nil {
		return fmt.Errorf("want: %w", err)
	}
	if len(m.wanted) == 0 {
		m.busy = time.Now()
	}
	m.asked = time.Now()
	m.wanted = append(m.wanted, k)
	m.bufs <- b
	return nil
}

// onArrival files a received batch, or handles why a receiver stopped. It
// returns a buffer that is free again.
func (s *Stream) onArrival(a poolArrival) *Batch {
	p, m := s.pool, a.m
	current := a.gen == m.gen && m.up
	if a.err != nil {
		if current && streamFailed(a.err) && p.failed == nil {
			// The batch it was making (the first it owed) fails the
			// stream, as on one daemon: after every batch before it.
			p.failed, p.failedAt = fmt.Errorf("client: daemon %s: %w", m.addr, a.err), p.deliver
			if len(m.wanted) > 0 {
				p.failedAt = m.wanted[0]
			}
		}
		if current {
			s.memberDown(m, a.err)
		}
		return a.b
	}
	b, k := a.b, int64(a.b.w.Seq)
	b.m, b.mgen, b.serverSeq, b.held = m, a.gen, a.b.w.Seq, true
	// Acked at once: the batch is in the stream's own buffer, and a
	// daemon's window must not wait on the caller, who may be waiting for
	// an earlier batch another daemon owes.
	s.ackMember(b)
	if b.Offset = 0; b.Epoch == s.cfg.Start.Epoch {
		b.Offset = s.cfg.Start.Offset // only the start epoch is resumed at an offset
	}
	if pos, ok := p.num.At(k); !ok || pos != b.Position() {
		if current { // its stream makes other batches than the pool's
			s.memberDown(m, fmt.Errorf("it sent %v as batch %d, which is %v", b.Position(), k, pos))
		}
		b.held = false
		return b
	}
	if current {
		i := slices.Index(m.wanted, k)
		if i < 0 {
			s.memberDown(m, fmt.Errorf("it sent batch %d, which it was not asked for", k))
			b.held = false
			return b
		}
		m.wanted = slices.Delete(m.wanted, i, i+1)
		now := time.Now()
		if d := now.Sub(m.busy); m.svc == 0 {
			m.svc = d
		} else {
			m.svc = (3*m.svc + d) / 4
		}
		m.busy = now
	}
	if k < p.deliver || p.got[k] != nil {
		// A second copy (the caller's batch was also asked of another
		// daemon, or a lost daemon's late answer): drop it.
		b.held = false
		return b
	}
	if i := slices.Index(p.lost, k); i >= 0 {
		p.lost = slices.Delete(p.lost, i, i+1)
	}
	m.made++
	p.got[k] = b
	for {
		b := p.got[p.deliver]
		if b == nil {
			break
		}
		delete(p.got, p.deliver)
		delete(p.hedged, p.deliver)
		b.Seq = uint64(p.deliver)
		p.deliver++
		next, ok := p.num.At(p.deliver)
		if !ok {
			next = sampler.Position{Epoch: s.endEpoch}
		}
		s.mu.Lock()
		s.next = next
		s.stats.Batches++
		s.stats.Images += int64(len(b.Indices))
		s.stats.Bytes += int64(len(b.Data))
		s.mu.Unlock()
		s.ready <- b // never blocks: it holds every buffer
		p.waiting = time.Now()
	}
	return nil
}

// ackMember acknowledges b to the stream it came on, if that is still
// open. Its wait_ns is the caller's last wait in Next, so the daemon's
// --workers auto still learns whether the trainer waits.
func (s *Stream) ackMember(b *Batch) error {
	wait := uint64(s.pool.lastWait.Load())
	err := b.m.send(b.mgen, &pb.StreamRequest{Msg: &pb.StreamRequest_Ack{Ack: &pb.Ack{Seqs: []uint64{b.serverSeq}, WaitNs: []uint64{wait}}}})
	if err == io.EOF {
		err = nil // that stream ended; the receiver reports why
	}
	return err
}

// housekeep drops silent daemons, asks a second daemon for a slow
// batch the caller waits for, reconnects lost daemons, and says when
// every daemon is gone.
func (s *Stream) housekeep(take func() *Batch, put func(*Batch)) {
	p, now := s.pool, time.Now()
	up, fastest := 0, time.Duration(0)
	for _, m := range p.members {
		if m.up && len(m.wanted) > 0 {
			if limit := max(s.cfg.Pool.FailoverAfter, 8*m.svc); now.Sub(m.busy) > limit {
				s.memberDown(m, fmt.Errorf("silent for %v while owing %d batches", now.Sub(m.busy).Round(time.Millisecond), len(m.wanted)))
			}
		}
		if m.up && m.removed && len(m.wanted) == 0 {
			s.memberDown(m, errors.New("gone from the pool's name"))
		}
		if m.up {
			up++
			if m.svc > 0 && (fastest == 0 || m.svc < fastest) {
				fastest = m.svc
			}
		}
	}
	// The caller waits for the head number: if its daemon is slow beyond
	// what the fastest takes, the others make it too, and what else that
	// daemon owes, which waits behind it; the first copy of each wins.
	if head := p.deliver; up > 1 && p.got[head] == nil && !p.hedged[head] && now.Sub(p.waiting) > max(100*time.Millisecond, 4*fastest) {
		for _, m := range p.members {
			if m.up && slices.Contains(m.wanted, head) {
				s.hedge(m, take, put)
				break
			}
		}
	}
	for _, m := range p.members {
		if !m.up && !m.removed && !m.dialling && !now.Before(m.retryAt) {
			m.dialling = true
			go func() {
				r := s.dialMember(m.addr)
				r.m = m
				select {
				case p.opened <- r:
				case <-s.ctx.Done():
					if r.err == nil {
						r.cancel()
						r.conn.Close()
					}
				}
			}()
		}
	}
	if up == 0 && !p.allDown {
		p.allDown = true
		var addrs []string
		var errs []error
		for _, m := range p.members {
			addrs = append(addrs, m.addr)
			if m.lastErr != nil {
				errs = append(errs, fmt.Errorf("%s: %w", m.addr, m.lastErr))
			}
		}
		s.cfg.Pool.OnEvent(PoolEvent{Kind: AllDown, Addrs: addrs, Err: errors.Join(errs...)})
		s.resolveAgain()
	}
}

// hedge wants what slow m owes of the other daemons too, as their windows
// and the free buffers allow.
func (s *Stream) hedge(m *member, take func() *Batch, put func(*Batch)) {
	p := s.pool
	for _, k := range slices.Clone(m.wanted) {
		if p.hedged[k] || p.got[k] != nil {
			continue
		}
		m2 := s.pick(m)
		if m2 == nil {
			return
		}
		b := take()
		if b == nil {
			return
		}
		if err := s.want(m2, k, b); err != nil {
			put(b)
			s.memberDown(m2, err)
			continue
		}
		p.hedged[k] = true
	}
}

// onOpened takes a reconnected (or new) daemon into the pool, if it
// serves what the pool serves.
func (s *Stream) onOpened(r poolOpened) {
	m := r.m
	m.dialling = false
	if r.err != nil {
		m.lastErr = r.err
		m.backoff = max(100*time.Millisecond, min(2*m.backoff, 2*time.Second))
		m.retryAt = time.Now().Add(m.backoff)
		return
	}
	if err := sameStream(s.header, r.h); err != nil || m.removed {
		r.cancel()
		r.conn.Close()
		if err != nil {
			m.lastErr, m.retryAt = err, time.Now().Add(10*time.Second)
			s.cfg.Pool.OnEvent(PoolEvent{Kind: DaemonRefused, Addr: m.addr, Err: err})
		}
		return
	}
	s.memberUp(r)
}

// onResolved adds daemons new to the name and retires those gone from it.
func (s *Stream) onResolved(addrs []string) {
	p := s.pool
	for _, m := range p.members {
		m.removed = !slices.Contains(addrs, m.addr)
	}
	for _, a := range addrs {
		if !slices.ContainsFunc(p.members, func(m *member) bool { return m.addr == a }) {
			p.members = append(p.members, &member{addr: a, retryAt: time.Now()})
		}
	}
}

// resolveAgain looks the pool's name up in the background.
func (s *Stream) resolveAgain() {
	p := s.pool
	if p.target.host == "" {
		return
	}
	go func() {
		addrs, err := p.target.resolve(s.ctx)
		if err != nil || len(addrs) == 0 {
			return // keep the daemons known; the next tick tries again
		}
		select {
		case p.resolved <- addrs:
		default:
		}
	}()
}

// publish updates what Stream.Pool reports.
func (s *Stream) publish() {
	p := s.pool
	view := make([]PoolMember, 0, len(p.members))
	for _, m := range p.members {
		view = append(view, PoolMember{Addr: m.addr, Up: m.up, Made: m.made, Outstanding: len(m.wanted), BatchTime: m.svc, Connects: m.connects})
	}
	p.mu.Lock()
	p.view = view
	p.mu.Unlock()
	p.published = time.Now()
}

// endPool closes every daemon's stream, waits for the receivers to let go
// of their buffers, and ends the caller's side.
func (s *Stream) endPool() {
	p := s.pool
	for _, m := range p.members {
		if m.up {
			m.sendMu.Lock()
			if m.gs != nil {
				m.gs.CloseSend() // the daemon ends the stream with OK
				m.gs = nil       // and later acks go nowhere: it released everything
			}
			m.sendMu.Unlock()
		}
	}
	s.publish()
	close(s.ready)
	close(s.done)
}

// Pool reports the daemons of a pool stream (nil for a stream on one
// daemon): as of at most 50 ms ago while the stream runs, exact once it
// has ended.
func (s *Stream) Pool() []PoolMember {
	if s.pool == nil {
		return nil
	}
	s.pool.mu.Lock()
	defer s.pool.mu.Unlock()
	return slices.Clone(s.pool.view)
}
