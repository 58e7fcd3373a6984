//go:build linux

package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loaderd/loaderd/client"
)

// The flood test's daemon: a child process with a small RLIMIT_NOFILE,
// soft and hard, so that the daemon's own raise cannot lift it.
const (
	floodChildEnv  = "LOADERD_FD_FLOOD_CHILD" // the socket path, in the child
	floodNofile    = 64                       // the child's descriptor limit
	floodIdleConns = 4 * floodNofile          // idle hand-over connections the test opens
)

// The flood must run the daemon out of descriptors before the per-user
// cap refuses it (all its connections are this test's user): this fails
// to compile if fdMaxPerUser falls below floodNofile.
const _ = uint(fdMaxPerUser - floodNofile)

// TestFdFloodChild is the daemon of TestFdSocketIdleFlood, run in a child
// process; it does nothing in an ordinary test run.
func TestFdFloodChild(t *testing.T) {
	sock := os.Getenv(floodChildEnv)
	if sock == "" {
		t.Skip("the daemon of TestFdSocketIdleFlood; runs only as its child")
	}
	lim := syscall.Rlimit{Cur: floodNofile, Max: floodNofile}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		fmt.Fprintln(os.Stderr, "setrlimit:", err)
		os.Exit(2)
	}
	if bin := os.Getenv("LOADERD_BIN"); bin != "" {
		// The real daemon binary, under the limit just set (exec keeps it).
		err := syscall.Exec(bin, []string{bin, "serve", "--unix", sock, "--dataset", "synth=synthetic:2000",
			"--workers", "1", "--memory-limit", "1GiB"}, os.Environ())
		fmt.Fprintln(os.Stderr, "exec:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	err := Run(ctx, Config{Unix: sock, UnixMode: 0o600, Datasets: []string{"synth=synthetic:2000"}, Workers: 1,
		ShutdownTimeout: 5 * time.Second, MemoryLimit: 1 << 30, OnError: "fail"}, log, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "Run:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// childLog collects a child's stderr lines and wakes waiters on each.
type childLog struct {
	mu    sync.Mutex
	lines []string
	more  chan struct{} // closed and replaced at every line, and at EOF
	eof   bool
}

func readChildLog(r io.Reader) *childLog {
	l := &childLog{more: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			l.mu.Lock()
			l.lines = append(l.lines, sc.Text())
			close(l.more)
			l.more = make(chan struct{})
			l.mu.Unlock()
		}
		l.mu.Lock()
		l.eof = true
		close(l.more)
		l.mu.Unlock()
	}()
	return l
}

// wait returns the first line containing substr, or an error once the
// child's stderr ends (it exited) or timeout passes.
func (l *childLog) wait(substr string, timeout time.Duration) (string, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	seen := 0
	for {
		l.mu.Lock()
		for ; seen < len(l.lines); seen++ {
			if strings.Contains(l.lines[seen], substr) {
				line := l.lines[seen]
				l.mu.Unlock()
				return line, nil
			}
		}
		eof, more := l.eof, l.more
		l.mu.Unlock()
		if eof {
			return "", fmt.Errorf("the daemon exited before logging %q", substr)
		}
		select {
		case <-more:
		case <-deadline.C:
			return "", fmt.Errorf("no %q in the daemon's log after %v", substr, timeout)
		}
	}
}

func (l *childLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// TestFdSocketIdleFlood floods the hand-over socket (PATH.fd) of a daemon
// whose descriptor limit is floodNofile with floodIdleConns connections
// that send nothing, so that its accept fails with EMFILE. The daemon must
// live through it: it backs off instead of ending serve, and once the
// flood is gone a shared-memory client opens a stream and reads a batch
// through the hand-over socket; at SIGTERM it exits cleanly. With
// LOADERD_BIN set the daemon is that binary, else this package's Run.
func TestFdSocketIdleFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a daemon process")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "loaderd.sock")
	cmd := exec.Command(exe, "-test.run=^TestFdFloodChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), floodChildEnv+"="+sock)
	// A pipe of our own, not StderrPipe: Wait may return before the last
	// lines are read, and must not close them away.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd.Stderr = w
	err = cmd.Start()
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	log := readChildLog(r)
	exited := make(chan struct{}) // closed once the child is gone; then exitErr is its end
	var exitErr error
	go func() { exitErr = cmd.Wait(); close(exited) }()
	defer func() {
		cmd.Process.Kill() // no-op once it exited
		<-exited
	}()

	serving, err := log.wait(`msg=serving`, 60*time.Second)
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	// The start line reports the descriptor limits the daemon runs under.
	for _, kv := range []string{"nofile_soft", "nofile_hard"} {
		m := regexp.MustCompile(kv + `=(\d+)`).FindStringSubmatch(serving)
		if m == nil {
			t.Errorf("the start line has no %s: %s", kv, serving)
			continue
		}
		if n, _ := strconv.Atoi(m[1]); n != floodNofile {
			t.Errorf("start line: %s=%d, want %d (the child's limit): %s", kv, n, floodNofile, serving)
		}
	}

	fdSock := fdSocketPath(sock)
	var flood []net.Conn
	defer func() {
		for _, c := range flood {
			c.Close()
		}
	}()
	for range floodIdleConns {
		c, err := net.DialTimeout("unix", fdSock, 10*time.Second)
		if err != nil {
			log.wait("serve failed", 10*time.Second) // the daemon's last words, if it is gone
			t.Fatalf("flood connection %d: %v\n%s", len(flood)+1, err, log)
		}
		flood = append(flood, c)
	}
	// More connections than the daemon has descriptors: its accept fails
	// with EMFILE, which it must survive.
	if _, err := log.wait("too many open files", 60*time.Second); err != nil {
		t.Fatalf("after %d idle connections: %v\n%s", len(flood), err, log)
	}
	if line, err := log.wait(fdAcceptBackoffMsg, 30*time.Second); err != nil {
		t.Fatalf("after %d idle connections: %v\n%s", len(flood), err, log)
	} else {
		t.Logf("daemon: %s", line)
	}
	for _, c := range flood {
		c.Close()
	}
	flood = nil

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := client.Dial("unix://" + sock)
	if err != nil {
		t.Fatalf("dial after the flood: %v\n%s", err, log)
	}
	defer cl.Close()
	s, err := cl.Open(ctx, client.StreamConfig{Dataset: "synth", BatchSize: 64, Seed: 1, SharedMemory: true, Epochs: 1})
	if err != nil {
		t.Fatalf("open a shared-memory stream after the flood: %v\n%s", err, log)
	}
	if s.Header().GetShm().GetFdSocket() == "" {
		t.Fatalf("the stream is not on shared memory through the hand-over socket: %v", s.Header())
	}
	b, err := s.Next(ctx)
	if err != nil {
		t.Fatalf("first batch after the flood: %v\n%s", err, log)
	}
	b.Release()
	t.Logf("%d idle connections against RLIMIT_NOFILE %d: daemon alive; a shared-memory stream opened and gave its first batch %v after the flood closed",
		floodIdleConns, floodNofile, time.Since(start).Round(time.Millisecond))
	s.Close()
	cl.Close()

	select {
	case <-exited:
		t.Fatalf("the daemon exited (%v)\n%s", exitErr, log)
	default:
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		if exitErr != nil {
			t.Fatalf("daemon at SIGTERM: %v\n%s", exitErr, log)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the daemon did not stop at SIGTERM\n%s", log)
	}
	if strings.Contains(log.String(), "serve failed") {
		t.Fatalf("serve failed:\n%s", log)
	}
}
