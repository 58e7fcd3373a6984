package server

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// testBound bounds every wait of these tests: far above what any of them
// needs on a loaded machine, so only a broken broker reaches it.
const testBound = 20 * time.Second

// startBroker serves b on a fresh Unix socket and returns its path; at
// cleanup it closes b and checks that serve ended without error.
func startBroker(t *testing.T, b *fdBroker, wrap func(net.Listener) net.Listener) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "fdb-") // short: a socket path has ~108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "s.fd")
	var lis net.Listener
	if lis, err = net.Listen("unix", path); err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		lis = wrap(lis)
	}
	done := make(chan error, 1)
	go func() { done <- b.serve(lis) }()
	t.Cleanup(func() {
		b.close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(testBound):
			t.Error("serve did not return after close")
		}
	})
	return path
}

// testBroker is a broker with its metrics on a registry of its own and
// its log in buf (syncBuffer: fingerprint_test.go).
func testBroker(buf *syncBuffer) *fdBroker {
	b := newFdBroker()
	var h slog.Handler = slog.DiscardHandler
	if buf != nil {
		h = slog.NewTextHandler(buf, nil)
	}
	b.instrument(slog.New(h), prometheus.NewRegistry())
	return b
}

// metricValue reads a counter or gauge.
func metricValue(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

// waitConns waits until the broker runs n exchanges.
func waitConns(t *testing.T, b *fdBroker, n int) {
	t.Helper()
	deadline := time.Now().Add(testBound)
	for {
		b.mu.Lock()
		got := b.conns
		b.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the broker runs %d exchanges, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// dialIdle opens a hand-over connection that sends nothing.
func dialIdle(t *testing.T, path string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("unix", path, testBound)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readUntilClosed reads c until the broker closes it, within testBound.
func readUntilClosed(t *testing.T, c net.Conn) []byte {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(testBound))
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("the broker did not close the connection: %v (read %q)", err, b)
	}
	return b
}

// TestFdSocketIdleTimeout: a connection that sends nothing is closed
// after the exchange deadline, and counted.
func TestFdSocketIdleTimeout(t *testing.T) {
	b := testBroker(nil)
	b.exchangeTimeout = 50 * time.Millisecond
	path := startBroker(t, b, nil)
	c := dialIdle(t, path)
	if got := readUntilClosed(t, c); len(got) != 0 {
		t.Fatalf("an idle connection got %q", got)
	}
	waitConns(t, b, 0)
	if n := metricValue(t, b.refused.WithLabelValues(fdRefusedTimeout)); n != 1 {
		t.Fatalf("loaderd_fd_handover_refused_total{reason=timeout} = %v, want 1", n)
	}
	// Half a token, then silence: the same.
	c = dialIdle(t, path)
	c.Write([]byte{tokenLen, 1, 2, 3})
	if got := readUntilClosed(t, c); len(got) != 0 {
		t.Fatalf("a stalled connection got %q", got)
	}
}

// TestFdSocketCap: with maxConns exchanges running, connection
// maxConns+1 is refused at once with a message; once one ends, the next
// connection is served again.
func TestFdSocketCap(t *testing.T) {
	const maxConns = 3
	b := testBroker(nil)
	b.exchangeTimeout = time.Hour // only the cap may close anything here
	b.maxConns, b.maxPerUser = maxConns, maxConns
	path := startBroker(t, b, nil)
	var idle []net.Conn
	for range maxConns {
		idle = append(idle, dialIdle(t, path))
	}
	waitConns(t, b, maxConns)
	got := readUntilClosed(t, dialIdle(t, path))
	if len(got) == 0 || got[0] != 1 || !strings.Contains(string(got), "busy") {
		t.Fatalf("connection %d got %q, want a refusal (1, busy…)", maxConns+1, got)
	}
	if n := metricValue(t, b.refused.WithLabelValues(fdRefusedBusy)); n != 1 {
		t.Fatalf("loaderd_fd_handover_refused_total{reason=busy} = %v, want 1", n)
	}
	if n := metricValue(t, b.connections); n != maxConns {
		t.Fatalf("loaderd_fd_handover_connections = %v, want %d", n, maxConns)
	}
	idle[0].Close()
	waitConns(t, b, maxConns-1)
	// A slot is free: an exchange runs (a made-up token is answered as
	// unknown, not as busy).
	if _, err := fetchTestRegion(path, make([]byte, tokenLen)); err == nil || !strings.Contains(err.Error(), "unknown token") {
		t.Fatalf("with a slot free: %v, want an unknown-token answer", err)
	}
}

// TestFdSocketPerUserCap: one user cannot take more than maxPerUser
// slots; another user still gets one.
func TestFdSocketPerUserCap(t *testing.T) {
	b := testBroker(nil)
	b.exchangeTimeout = time.Hour
	b.maxConns, b.maxPerUser = 10, 2
	path := startBroker(t, b, nil)
	probe := dialIdle(t, path)
	waitConns(t, b, 1)
	b.mu.Lock()
	users := len(b.byUser)
	b.mu.Unlock()
	if users == 0 {
		t.Skip("no peer credentials on this system: only the overall cap applies")
	}
	dialIdle(t, path)
	waitConns(t, b, 2)
	got := readUntilClosed(t, dialIdle(t, path))
	if len(got) == 0 || got[0] != 1 || !strings.Contains(string(got), "for this user") {
		t.Fatalf("the user's third connection got %q, want a refusal", got)
	}
	if n := metricValue(t, b.refused.WithLabelValues(fdRefusedUserBusy)); n != 1 {
		t.Fatalf("loaderd_fd_handover_refused_total{reason=user_busy} = %v, want 1", n)
	}
	probe.Close()
	waitConns(t, b, 1)

	// The bookkeeping, for users the test cannot be: another user is
	// admitted while one is at its cap, up to the overall cap.
	a := newFdBroker()
	a.maxConns, a.maxPerUser = 3, 2
	for i, want := range []string{"", "", fdRefusedUserBusy} {
		if got := a.admit(1000, true); got != want {
			t.Fatalf("user 1000, connection %d: %q, want %q", i+1, got, want)
		}
	}
	if got := a.admit(1001, true); got != "" {
		t.Fatalf("user 1001 refused (%q) while 1000 is at its cap", got)
	}
	if got := a.admit(1002, true); got != fdRefusedBusy {
		t.Fatalf("past the overall cap: %q, want %q", got, fdRefusedBusy)
	}
	a.release(1000, true)
	if got := a.admit(1002, true); got != "" {
		t.Fatalf("after a release: %q", got)
	}
}

// failingListener fails its first n accepts with EMFILE, as accept4 does
// out of descriptors, then accepts for real; every failure is reported
// on failed.
type failingListener struct {
	net.Listener
	mu     sync.Mutex
	n      int
	failed chan struct{}
}

func (l *failingListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	fail := l.n != 0
	if l.n > 0 {
		l.n--
	}
	l.mu.Unlock()
	if fail {
		select {
		case l.failed <- struct{}{}:
		default:
		}
		return nil, &net.OpError{Op: "accept", Net: "unix", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestFdSocketAcceptErrors: failing accepts do not end serve; they are
// retried, counted, and logged once per logEvery, and the broker serves
// once accept works again.
func TestFdSocketAcceptErrors(t *testing.T) {
	const failures = 20
	var log syncBuffer
	b := testBroker(&log)
	b.backoffMin, b.backoffMax, b.logEvery = time.Microsecond, 50*time.Microsecond, time.Hour
	path := startBroker(t, b, func(l net.Listener) net.Listener {
		return &failingListener{Listener: l, n: failures, failed: make(chan struct{}, 1)}
	})
	if _, err := fetchTestRegion(path, make([]byte, tokenLen)); err == nil || !strings.Contains(err.Error(), "unknown token") {
		t.Fatalf("after %d failed accepts: %v, want an unknown-token answer", failures, err)
	}
	if n := metricValue(t, b.acceptErrs); n != failures {
		t.Fatalf("loaderd_fd_handover_accept_errors_total = %v, want %d", n, failures)
	}
	if n := strings.Count(log.String(), fdAcceptBackoffMsg); n != 1 {
		t.Fatalf("%d log lines for %d failed accepts in one logEvery, want 1:\n%s", n, failures, log.String())
	}
	if !strings.Contains(log.String(), "too many open files") {
		t.Fatalf("the log does not say why:\n%s", log.String())
	}
}

// TestFdSocketCloseDuringBackoff: close ends serve at once, even while it
// waits out a long backoff.
func TestFdSocketCloseDuringBackoff(t *testing.T) {
	b := testBroker(nil)
	b.backoffMin, b.backoffMax = time.Hour, time.Hour
	dir, err := os.MkdirTemp("", "fdb-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	l, err := net.Listen("unix", filepath.Join(dir, "s.fd"))
	if err != nil {
		t.Fatal(err)
	}
	fl := &failingListener{Listener: l, n: -1, failed: make(chan struct{}, 1)} // fails forever
	done := make(chan error, 1)
	go func() { done <- b.serve(fl) }()
	select {
	case <-fl.failed:
	case <-time.After(testBound):
		t.Fatal("serve never called accept")
	}
	b.close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(testBound):
		t.Fatal("serve still waits out its backoff after close")
	}
}

// TestFdSocketListenerClosedElsewhere: a listener closed by someone else
// than close ends serve with an error instead of a retry loop.
func TestFdSocketListenerClosedElsewhere(t *testing.T) {
	b := testBroker(nil)
	dir, err := os.MkdirTemp("", "fdb-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	l, err := net.Listen("unix", filepath.Join(dir, "s.fd"))
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if err := b.serve(l); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("serve on a closed listener: %v, want net.ErrClosed", err)
	}
}
