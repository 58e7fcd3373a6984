package clienttest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loaderd/loaderd/client"
)

// StartTimeout bounds how long Start waits for a daemon to answer. It is
// generous: a loaded CI machine may take seconds to start a process.
const StartTimeout = 60 * time.Second

// Daemon is a loaderd serve process started by Start.
type Daemon struct {
	// Addr is the address client.Dial takes: unix://SOCKET.
	Addr string
	// Socket is the Unix socket's path; shared memory is handed over on
	// Socket+".fd" beside it.
	Socket string

	dir  string // holds the socket; removed by Stop
	cmd  *exec.Cmd
	out  *LockedBuffer
	done chan struct{}
	err  error // the process's exit, valid after done closes
}

// Start runs New(args...) for a test: it fails the test if the daemon
// does not come up, and stops it when the test ends, printing its log if
// the test failed.
func Start(tb testing.TB, args ...string) *Daemon {
	tb.Helper()
	d, err := New(BinaryFor(tb), args...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		d.Stop()
		if tb.Failed() {
			tb.Logf("loaderd %s:\n%s", strings.Join(d.cmd.Args[1:], " "), d.Log())
		}
	})
	return d
}

// New runs `bin serve --unix SOCKET ARGS` and waits until it lists its
// datasets. args are serve's flags, e.g. "--dataset",
// "train=synthetic:256", "--workers", "2". The caller must Stop it.
func New(bin string, args ...string) (*Daemon, error) {
	// A directory of its own keeps the socket path under the 108-byte
	// limit that t.TempDir's long names can exceed.
	dir, err := os.MkdirTemp("", "loaderd-test-")
	if err != nil {
		return nil, err
	}
	sock := filepath.Join(dir, "loaderd.sock")
	full := append([]string{"serve", "--unix", sock, "--log-level", "warn"}, args...)
	d := &Daemon{Addr: "unix://" + sock, Socket: sock, dir: dir, out: &LockedBuffer{}, done: make(chan struct{})}
	d.cmd = exec.Command(bin, full...)
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	if err := d.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("clienttest: %s: %w", bin, err)
	}
	go func() { d.err = d.cmd.Wait(); close(d.done) }()
	if err := d.wait(); err != nil {
		d.Stop()
		return nil, fmt.Errorf("clienttest: %s %s: %w\n%s", bin, strings.Join(full, " "), err, d.Log())
	}
	return d, nil
}

// wait polls the socket until the daemon lists its datasets, it exits, or
// StartTimeout passes.
func (d *Daemon) wait() error {
	deadline := time.Now().Add(StartTimeout)
	for {
		select {
		case <-d.done:
			return fmt.Errorf("exited before serving: %v", d.err)
		default:
		}
		if _, err := os.Stat(d.Socket); err == nil {
			c, err := client.Dial(d.Addr)
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err = c.Datasets(ctx)
				cancel()
				c.Close()
				if err == nil {
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not serving after %v", StartTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Dial returns a client of d, closed when the test ends.
func (d *Daemon) Dial(tb testing.TB) *client.Client {
	tb.Helper()
	c, err := client.Dial(d.Addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// Stop ends the daemon gracefully (SIGTERM, as an operator would) and
// waits; after 10 s it kills it. It returns the process's exit error, nil
// for a clean stop. Stop may be called more than once.
func (d *Daemon) Stop() error {
	select {
	case <-d.done:
	default:
		d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.done:
		case <-time.After(10 * time.Second):
			d.cmd.Process.Kill()
			<-d.done
		}
	}
	os.RemoveAll(d.dir)
	return d.exitErr()
}

// Kill ends the daemon at once (SIGKILL), as a crash would, and waits.
func (d *Daemon) Kill() {
	d.cmd.Process.Kill()
	<-d.done
}

// Pid returns the daemon's process ID (to pin it to cores, say).
func (d *Daemon) Pid() int { return d.cmd.Process.Pid }

// Signal sends sig to the daemon: SIGSTOP and SIGCONT play a hung daemon.
func (d *Daemon) Signal(sig os.Signal) error { return d.cmd.Process.Signal(sig) }

// TCPAddr returns the TCP address a daemon started with "--listen
// 127.0.0.1:0" bound, read from its "serving" log line: so it must run at
// --log-level info.
func (d *Daemon) TCPAddr(tb testing.TB) string {
	tb.Helper()
	re := regexp.MustCompile(`addrs="?\[(127\.0\.0\.1:\d+)`)
	for deadline := time.Now().Add(StartTimeout); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := re.FindStringSubmatch(d.Log()); m != nil {
			return m[1]
		}
	}
	tb.Fatalf("clienttest: no TCP address in the daemon's log (run it with --listen 127.0.0.1:0 --log-level info):\n%s", d.Log())
	return ""
}

// Log returns what the daemon has written to stdout and stderr so far.
func (d *Daemon) Log() string { return d.out.String() }

func (d *Daemon) exitErr() error {
	var ee *exec.ExitError
	if errors.As(d.err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM {
			return nil
		}
	}
	return d.err
}

var build struct {
	once sync.Once
	path string
	err  error
}

// Binary returns the loaderd binary to run (see the package comment),
// building it at most once per process.
func Binary() (string, error) {
	if p := os.Getenv("LOADERD_BIN"); p != "" {
		return p, nil
	}
	build.once.Do(func() { build.path, build.err = buildFromCheckout() })
	if build.err != nil {
		return "", fmt.Errorf("clienttest: %w", build.err)
	}
	return build.path, nil
}

// BinaryFor is Binary for a test: it fails the test without a binary.
func BinaryFor(tb testing.TB) string {
	tb.Helper()
	p, err := Binary()
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// buildFromCheckout builds cmd/loaderd of the checkout the test runs in,
// or falls back to $PATH outside one.
func buildFromCheckout() (string, error) {
	root, ok := checkoutRoot()
	if !ok {
		p, err := exec.LookPath("loaderd")
		if err != nil {
			return "", errors.New("no loaderd: set LOADERD_BIN, run inside a loaderd checkout, or put loaderd on PATH")
		}
		return p, nil
	}
	// One binary per checkout, rebuilt under a lock: go build relinks
	// only when a source changed, and test processes of several packages
	// may ask at once.
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(os.TempDir(), "loaderd-clienttest-"+hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "loaderd")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/loaderd")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building loaderd in %s: %v\n%s", root, err, out)
	}
	return bin, nil
}

// checkoutRoot walks up from the working directory to the daemon's
// module: the go.mod that declares github.com/loaderd/loaderd.
func checkoutRoot() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		if f, err := os.Open(filepath.Join(dir, "go.mod")); err == nil {
			s := bufio.NewScanner(f)
			s.Scan()
			f.Close()
			if strings.TrimSpace(s.Text()) == "module github.com/loaderd/loaderd" {
				return dir, true
			}
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", false
		}
		dir = up
	}
}

// LockedBuffer is a log that is safe to read while processes or
// goroutines write it: a daemon's output from its two pipes, say.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
