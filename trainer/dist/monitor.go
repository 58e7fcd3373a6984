package dist

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// Options tune the rendezvous and the failure monitor.
type Options struct {
	// JoinTimeout bounds the wait for every rank at start (default 5 min;
	// torch's default is 30). Ranks may start in any order.
	JoinTimeout time.Duration
	// Heartbeat is the interval between pings on each connection (default 1 s).
	Heartbeat time.Duration
	// DeadAfter is the silence after which a peer is declared dead (default
	// 15 s): a node that vanished without its kernel closing the sockets.
	// A killed process is noticed at once: its kernel closes them.
	DeadAfter time.Duration
	// OnFailure is called once, from a monitor goroutine, when another rank
	// fails or dies; this rank may be blocked inside a collective then.
	OnFailure func(error)
}

func (o *Options) defaults() {
	if o.JoinTimeout <= 0 {
		o.JoinTimeout = 5 * time.Minute
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = time.Second
	}
	if o.DeadAfter <= 0 {
		o.DeadAfter = 15 * time.Second
	}
}

// PeerError says which rank failed, where it ran, and how.
type PeerError struct {
	Rank   int    `json:"rank"`
	Pid    int    `json:"pid"`
	Host   string `json:"host"`
	Reason string `json:"reason"`
}

func (e *PeerError) Error() string {
	return fmt.Sprintf("dist: rank %d (pid %d on %s) %s", e.Rank, e.Pid, e.Host, e.Reason)
}

// Frame types of the monitor protocol: a byte, a u32 length, a payload.
const (
	fHello   = 'H' // rank → 0: member
	fWelcome = 'W' // 0 → rank: welcome (with the blob)
	fPing    = 'P'
	fFailed  = 'F' // a PeerError: rank → 0 about itself, 0 → all about anyone
	fBye     = 'B' // leaving normally
)

const maxFrame = 1 << 20

type member struct {
	Rank  int    `json:"rank"`
	World int    `json:"world"`
	Pid   int    `json:"pid"`
	Host  string `json:"host"`
}

type welcome struct {
	member
	Blob []byte `json:"blob"`
}

// peer is one connection: rank 0 holds one per other rank, the others one to 0.
type peer struct {
	member
	c   net.Conn
	r   *bufio.Reader
	wmu sync.Mutex
	bye bool // said goodbye (guarded by Monitor.mu)
}

func (p *peer) send(typ byte, payload []byte, timeout time.Duration) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	buf := make([]byte, 5, 5+len(payload))
	buf[0] = typ
	binary.LittleEndian.PutUint32(buf[1:], uint32(len(payload)))
	p.c.SetWriteDeadline(time.Now().Add(timeout))
	_, err := p.c.Write(append(buf, payload...))
	return err
}

func (p *peer) recv(timeout time.Duration) (byte, []byte, error) {
	p.c.SetReadDeadline(time.Now().Add(timeout))
	var h [5]byte
	if _, err := io.ReadFull(p.r, h[:]); err != nil {
		return 0, nil, err
	}
	n := binary.LittleEndian.Uint32(h[1:])
	if n > maxFrame {
		return 0, nil, fmt.Errorf("dist: frame of %d bytes", n)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(p.r, b)
	return h[0], b, err
}

// Monitor is this rank's link to the others through rank 0 (a star: one
// connection per rank). It carried the rendezvous; afterwards it watches:
// a peer whose connection closes without a goodbye, or stays silent past
// DeadAfter, or that reports its own failure, fails the group, and every
// rank learns which rank it was.
type Monitor struct {
	self   member
	o      Options
	mu     sync.Mutex
	peers  []*peer
	err    error
	left   []int
	closed bool
	failed chan struct{}
	stop   chan struct{}
}

func newMonitor(rank, world int, o Options) *Monitor {
	o.defaults()
	host, _ := os.Hostname()
	return &Monitor{self: member{Rank: rank, World: world, Pid: os.Getpid(), Host: host}, o: o,
		failed: make(chan struct{}), stop: make(chan struct{})}
}

// Serve is rank 0's side of the rendezvous: it accepts world−1 ranks on
// lis, hands each the blob (an NCCL unique id, or nothing) and then
// monitors them. lis is closed when Serve returns.
func Serve(ctx context.Context, lis net.Listener, world int, blob []byte, o Options) (*Monitor, error) {
	defer lis.Close()
	m := newMonitor(0, world, o)
	deadline := time.Now().Add(m.o.JoinTimeout)
	if tl, ok := lis.(*net.TCPListener); ok {
		tl.SetDeadline(deadline)
	}
	stop := context.AfterFunc(ctx, func() { lis.Close() })
	defer stop()
	seen := make(map[int]bool)
	fail := func(err error) (*Monitor, error) {
		m.closeAll()
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("dist: rendezvous on %s (%d of %d ranks joined): %w", lis.Addr(), len(seen)+1, world, err)
	}
	for len(seen) < world-1 {
		c, err := lis.Accept()
		if err != nil {
			return fail(err)
		}
		p := &peer{c: c, r: bufio.NewReader(c)}
		m.peers = append(m.peers, p)
		typ, b, err := p.recv(time.Until(deadline))
		if err == nil && typ != fHello {
			err = fmt.Errorf("unexpected frame %q from %s", typ, c.RemoteAddr())
		}
		if err == nil {
			err = json.Unmarshal(b, &p.member)
		}
		if err != nil {
			return fail(err)
		}
		switch {
		case p.World != world:
			return fail(fmt.Errorf("rank %d (pid %d on %s) belongs to a world of %d", p.Rank, p.Pid, p.Host, p.World))
		case p.Rank < 1 || p.Rank >= world || seen[p.Rank]:
			return fail(fmt.Errorf("rank %d (pid %d on %s) joined twice or out of range", p.Rank, p.Pid, p.Host))
		}
		seen[p.Rank] = true
	}
	w, _ := json.Marshal(welcome{member: m.self, Blob: blob})
	for _, p := range m.peers {
		if err := p.send(fWelcome, w, m.o.DeadAfter); err != nil {
			return fail(err)
		}
	}
	m.start()
	return m, nil
}

// Join is the side of the rendezvous of rank ≥ 1: it dials rank 0 at addr,
// retrying until rank 0 listens or JoinTimeout passes, and returns the
// monitor and rank 0's blob.
func Join(ctx context.Context, addr string, rank, world int, o Options) (*Monitor, []byte, error) {
	m := newMonitor(rank, world, o)
	ctx, cancel := context.WithTimeout(ctx, m.o.JoinTimeout)
	defer cancel()
	var c net.Conn
	var err error
	for {
		var d net.Dialer
		if c, err = d.DialContext(ctx, "tcp", addr); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("dist: rank %d: rank 0 at %s not reachable within %v: %w", rank, addr, m.o.JoinTimeout, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	p := &peer{c: c, r: bufio.NewReader(c)}
	m.peers = []*peer{p}
	hello, _ := json.Marshal(m.self)
	var w welcome
	typ, b, err := byte(0), []byte(nil), p.send(fHello, hello, m.o.DeadAfter)
	if err == nil {
		dl, _ := ctx.Deadline()
		typ, b, err = p.recv(time.Until(dl))
	}
	if err == nil && typ != fWelcome {
		err = fmt.Errorf("unexpected frame %q", typ)
	}
	if err == nil {
		err = json.Unmarshal(b, &w)
	}
	if err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("dist: rank %d: rendezvous with rank 0 at %s: %w", rank, addr, err)
	}
	p.member = w.member
	m.start()
	return m, w.Blob, nil
}

func (m *Monitor) start() {
	for _, p := range m.peers {
		go m.watch(p)
	}
	go m.beat()
}

func (m *Monitor) beat() {
	t := time.NewTicker(m.o.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			for _, p := range m.peers {
				p.send(fPing, nil, m.o.DeadAfter) // a dead peer shows up in watch
			}
		}
	}
}

// watch reads one connection until it ends; an end without a goodbye is
// the peer's death.
func (m *Monitor) watch(p *peer) {
	for {
		typ, b, err := p.recv(m.o.DeadAfter)
		if err != nil {
			m.mu.Lock()
			quiet := m.closed || p.bye
			m.mu.Unlock()
			if quiet {
				return
			}
			reason := "is gone: its connection closed without a goodbye (the process was killed or crashed)"
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				reason = fmt.Sprintf("sent nothing for %v (its node is down or unreachable)", m.o.DeadAfter)
			}
			m.fail(&PeerError{Rank: p.Rank, Pid: p.Pid, Host: p.Host, Reason: reason})
			return
		}
		switch typ {
		case fBye:
			m.mu.Lock()
			p.bye = true
			m.left = append(m.left, p.Rank)
			m.mu.Unlock()
		case fFailed:
			var e PeerError
			if json.Unmarshal(b, &e) == nil {
				m.fail(&e)
			}
		}
	}
}

// fail records the first failure, relays it (rank 0) and calls OnFailure.
func (m *Monitor) fail(e *PeerError) {
	m.mu.Lock()
	if m.err != nil || m.closed {
		m.mu.Unlock()
		return
	}
	m.err = e
	close(m.failed)
	m.mu.Unlock()
	if m.self.Rank == 0 {
		m.broadcast(fFailed, e, e.Rank)
	}
	if m.o.OnFailure != nil {
		m.o.OnFailure(e)
	}
}

func (m *Monitor) broadcast(typ byte, v any, skip int) {
	var b []byte
	if v != nil {
		b, _ = json.Marshal(v)
	}
	for _, p := range m.peers {
		if p.Rank != skip {
			p.send(typ, b, m.o.DeadAfter)
		}
	}
}

// Err returns the first failure of another rank, a *PeerError, or nil.
func (m *Monitor) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return m.err
	}
	if len(m.left) > 0 {
		return fmt.Errorf("dist: rank %d has finished and left the group while this rank (%d) still runs collectives",
			m.left[0], m.self.Rank)
	}
	return nil
}

// Failed is closed when another rank fails.
func (m *Monitor) Failed() <-chan struct{} { return m.failed }

// Close leaves the group: with cause nil, normally (the peers are told
// goodbye); otherwise the others learn that this rank failed and why.
func (m *Monitor) Close(cause error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	m.mu.Unlock()
	if cause != nil {
		e := &PeerError{Rank: m.self.Rank, Pid: m.self.Pid, Host: m.self.Host, Reason: "failed: " + cause.Error()}
		if errors.As(cause, new(*PeerError)) {
			e.Reason = "stopped after another rank's failure: " + cause.Error()
		}
		m.broadcast(fFailed, e, -1)
	} else {
		m.broadcast(fBye, nil, -1)
	}
	m.closeAll()
}

func (m *Monitor) closeAll() {
	select {
	case <-m.stop:
	default:
		close(m.stop)
	}
	for _, p := range m.peers {
		p.c.Close()
	}
}
