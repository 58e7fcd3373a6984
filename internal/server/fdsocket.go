package server

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
)

// fdBroker hands each shared-memory stream's region to its client over a
// Unix socket with SCM_RIGHTS: a read-only descriptor of the sealed memfd,
// for the client that presents the stream's token. Unlike opening
// /proc/<pid>/fd/<n>, this works across PID namespaces, containers that
// share only the socket's directory, and users, and reaches nothing else
// of the daemon's. It is safe for concurrent use.
//
// Anyone who may connect to the socket may also flood it, so the broker
// bounds what a connection can hold: an exchange has exchangeTimeout to
// complete; at most maxConns exchanges run at once, and at most
// maxPerUser for one peer user (SO_PEERCRED, where the system has it);
// connections beyond are refused at once. A failing accept (out of
// descriptors: EMFILE, ENFILE; or any other) is retried with a bounded
// backoff and never ends serve: the daemon's streams outlive the flood.
type fdBroker struct {
	mu      sync.Mutex
	streams map[string]*session // by token
	lis     net.Listener
	closed  bool
	stop    chan struct{} // closed by close: ends serve's backoff sleeps

	// Limits; set before serve (tests shrink them).
	exchangeTimeout        time.Duration
	maxConns, maxPerUser   int
	backoffMin, backoffMax time.Duration
	logEvery               time.Duration // accept errors: at most one log line per logEvery

	conns  int            // exchanges running; under mu
	byUser map[uint32]int // of them, by peer user; under mu

	log         *slog.Logger
	refused     *prometheus.CounterVec // by reason
	acceptErrs  prometheus.Counter
	connections prometheus.Gauge
}

const tokenLen = 32

// The hand-over socket's defaults. An exchange is one local write of 33
// bytes and one reply: a client that has sent nothing in 2 s is idle, or
// worse. Exchanges last microseconds, so 256 at once is a burst no real
// host makes; a quarter of them for one user leaves the others room.
const (
	fdExchangeTimeout = 2 * time.Second
	fdMaxConns        = 256
	fdMaxPerUser      = fdMaxConns / 4
	fdBackoffMin      = 5 * time.Millisecond
	fdBackoffMax      = time.Second
	fdLogEvery        = 10 * time.Second
)

// fdAcceptBackoffMsg is the log message of a failed accept.
const fdAcceptBackoffMsg = "fd socket: accept failed; backing off"

// Refusal reasons: loaderd_fd_handover_refused_total's label values.
const (
	fdRefusedBusy     = "busy"      // maxConns exchanges running
	fdRefusedUserBusy = "user_busy" // maxPerUser of the peer's user running
	fdRefusedTimeout  = "timeout"   // the client sent no token within exchangeTimeout
)

func newFdBroker() *fdBroker {
	return &fdBroker{
		streams:         map[string]*session{},
		stop:            make(chan struct{}),
		exchangeTimeout: fdExchangeTimeout,
		maxConns:        fdMaxConns,
		maxPerUser:      fdMaxPerUser,
		backoffMin:      fdBackoffMin,
		backoffMax:      fdBackoffMax,
		logEvery:        fdLogEvery,
		byUser:          map[uint32]int{},
		log:             slog.New(slog.DiscardHandler),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "loaderd_fd_handover_refused_total",
			Help: "Connections to the shared-memory hand-over socket (PATH.fd) closed without an exchange, by reason: " +
				"busy (too many exchanges at once), user_busy (too many for the peer's user), timeout (no token in time)."},
			[]string{"reason"}),
		acceptErrs: prometheus.NewCounter(prometheus.CounterOpts{Name: "loaderd_fd_handover_accept_errors_total",
			Help: "Failed accepts on the hand-over socket (PATH.fd), e.g. out of file descriptors; each is retried after a backoff."}),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{Name: "loaderd_fd_handover_connections",
			Help: "Hand-over exchanges running now on PATH.fd."}),
	}
}

// instrument logs to log and registers the broker's metrics on reg.
// Call it once, before serve.
func (b *fdBroker) instrument(log *slog.Logger, reg prometheus.Registerer) {
	b.log = log
	for _, r := range []string{fdRefusedBusy, fdRefusedUserBusy, fdRefusedTimeout} {
		b.refused.WithLabelValues(r) // every reason shows, at 0
	}
	reg.MustRegister(b.refused, b.acceptErrs, b.connections)
}

// register makes ss's region, and its lane if it has one, available for
// the returned token until unregister.
func (b *fdBroker) register(ss *session) []byte {
	tok := make([]byte, tokenLen)
	rand.Read(tok) // never fails (crypto/rand, Go 1.24+)
	b.mu.Lock()
	b.streams[string(tok)] = ss
	b.mu.Unlock()
	return tok
}

func (b *fdBroker) unregister(tok []byte) {
	b.mu.Lock()
	delete(b.streams, string(tok))
	b.mu.Unlock()
}

// serve answers hand-over requests on lis until close. Only close, or lis
// closed by someone else, ends it.
func (b *fdBroker) serve(lis net.Listener) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		lis.Close()
		return nil
	}
	b.lis = lis
	b.mu.Unlock()
	var delay time.Duration // the backoff after the last failed accept; 0 after a success
	var lastLog time.Time
	var unlogged int // failures since the last log line
	for {
		c, err := lis.Accept()
		if err != nil {
			b.mu.Lock()
			closed := b.closed
			b.mu.Unlock()
			if closed {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("fd socket: %w", err)
			}
			// Out of descriptors (EMFILE, ENFILE), of buffers, a connection
			// reset before its accept: none of these is the listener's end.
			// Wait, so that closing connections (the exchange deadline
			// closes idle ones) free what accept needs, and retry.
			delay = min(max(2*delay, b.backoffMin), b.backoffMax)
			b.acceptErrs.Inc()
			unlogged++
			if now := time.Now(); lastLog.IsZero() || now.Sub(lastLog) >= b.logEvery {
				b.log.Warn(fdAcceptBackoffMsg, "err", err, "failures", unlogged, "retry_in", delay)
				lastLog, unlogged = now, 0
			}
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-b.stop:
				t.Stop()
			}
			continue
		}
		delay = 0
		uc, ok := c.(*net.UnixConn)
		if !ok {
			c.Close()
			continue
		}
		uid, hasUID := peerUID(uc)
		if reason := b.admit(uid, hasUID); reason != "" {
			b.refuse(uc, reason)
			continue
		}
		go func() {
			defer b.release(uid, hasUID)
			b.handle(uc)
		}()
	}
}

// admit takes an exchange slot for a peer of user uid (hasUID: known), or
// says why not.
func (b *fdBroker) admit(uid uint32, hasUID bool) (refused string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conns >= b.maxConns {
		return fdRefusedBusy
	}
	if hasUID {
		if b.byUser[uid] >= b.maxPerUser {
			return fdRefusedUserBusy
		}
		b.byUser[uid]++
	}
	b.conns++
	b.connections.Set(float64(b.conns))
	return ""
}

func (b *fdBroker) release(uid uint32, hasUID bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.conns--
	if hasUID {
		if b.byUser[uid]--; b.byUser[uid] <= 0 {
			delete(b.byUser, uid)
		}
	}
	b.connections.Set(float64(b.conns))
}

// refuse tells a client beyond the caps why, without waiting for it, and
// closes its connection.
func (b *fdBroker) refuse(c *net.UnixConn, reason string) {
	b.refused.WithLabelValues(reason).Inc()
	msg := "loaderd: hand-over socket busy: too many exchanges at once; retry"
	if reason == fdRefusedUserBusy {
		msg = "loaderd: hand-over socket busy: too many exchanges at once for this user; retry"
	}
	// A fresh connection's send buffer is empty: the write does not wait,
	// and the deadline makes sure of it.
	c.SetWriteDeadline(time.Now().Add(10 * time.Millisecond))
	c.Write(append([]byte{1}, msg...))
	c.Close()
}

func (b *fdBroker) close() {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		close(b.stop)
	}
	lis := b.lis
	b.mu.Unlock()
	if lis != nil {
		lis.Close()
	}
}

// handle runs one exchange: one byte len(token) and the token in; one
// byte 0 with the descriptor, or 1 and a message, out. A lane's exchange
// opens with a zero byte, and its connection then goes to the stream's
// session. The whole exchange has exchangeTimeout.
func (b *fdBroker) handle(c *net.UnixConn) {
	keep := false // the connection became a lane
	defer func() {
		if !keep {
			c.Close()
		}
	}()
	c.SetDeadline(time.Now().Add(b.exchangeTimeout))
	var n [1]byte
	if _, err := io.ReadFull(c, n[:]); err != nil {
		b.readFailed(err)
		return
	}
	wantLane := n[0] == 0
	if wantLane {
		if _, err := io.ReadFull(c, n[:]); err != nil {
			b.readFailed(err)
			return
		}
	}
	if n[0] != tokenLen {
		c.Write(append([]byte{1}, fmt.Sprintf("loaderd: token of %d bytes, want %d", n[0], tokenLen)...))
		return
	}
	tok := make([]byte, tokenLen)
	if _, err := io.ReadFull(c, tok); err != nil {
		b.readFailed(err)
		return
	}
	b.mu.Lock()
	ss := b.streams[string(tok)]
	var slots *streamSlots
	if ss != nil {
		slots = ss.slots
		slots.retain() // the pool stays mapped while we reopen its memfd
	}
	b.mu.Unlock()
	if ss == nil {
		c.Write(append([]byte{1}, "loaderd: unknown token: the stream has ended, or never was"...))
		return
	}
	if wantLane {
		err := errors.New("loaderd: the stream has no lane: open it with shm_lane")
		if ss.lane != nil {
			err = ss.lane.claim()
		}
		if err != nil {
			slots.drop()
			c.Write(append([]byte{1}, err.Error()...))
			return
		}
	}
	f, err := slots.pool.OpenReadOnly()
	slots.drop()
	if err == nil {
		_, _, err = c.WriteMsgUnix([]byte{0}, unix.UnixRights(int(f.Fd())), nil)
		f.Close()
	} else {
		c.Write(append([]byte{1}, err.Error()...))
	}
	if wantLane {
		// The descriptor goes before the session's first frame. A lane
		// whose exchange failed is attached closed: the stream ends at once.
		keep = true
		if err != nil {
			c.Close()
		}
		ss.attachLane(c)
	}
}

// readFailed counts a client that let the deadline pass before sending
// its token.
func (b *fdBroker) readFailed(err error) {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		b.refused.WithLabelValues(fdRefusedTimeout).Inc()
	}
}
