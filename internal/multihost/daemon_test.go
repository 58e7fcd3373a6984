//go:build linux && !race

package multihost

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loaderd/loaderd/client/clienttest"
)

// dataset is what every daemon serves: synthetic, so each computes the
// same bytes with nothing to share; 128 batches of 8 an epoch.
const dataset = "train=synthetic:1024?seed=7"

// daemon is `loaderd serve` on one host of a network.
type daemon struct {
	Addr string
	cmd  *exec.Cmd
	log  *clienttest.LockedBuffer
	done chan struct{}
}

// startDaemon runs a daemon on host i and waits until it serves. It is
// killed when the test ends; its log is printed if the test failed.
func startDaemon(t *testing.T, n *network, i int) *daemon {
	t.Helper()
	bin := clienttest.BinaryFor(t)
	// --insecure-tcp: plaintext off loopback, which loaderd refuses
	// without it; these links are the test's own.
	args := []string{"serve", "--listen", n.Addr(i), "--insecure-tcp", "--dataset", dataset, "--workers", "1",
		"--memory-limit", "256MiB", "--log-level", "info"}
	d := &daemon{Addr: n.Addr(i), log: &clienttest.LockedBuffer{}, done: make(chan struct{})}
	d.cmd = n.Command(n.Daemons[i].NS, bin, args...)
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.cmd.Wait(); close(d.done) }()
	t.Cleanup(func() {
		d.Kill()
		if t.Failed() {
			t.Logf("daemon %s (%s), the end of its log:\n%s", d.Addr, n.Daemons[i].NS, tail(d.log.String(), 20))
		}
	})
	// ip netns exec execs loaderd, so cmd's process is the daemon itself.
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(d.log.String(), "msg=serving"); time.Sleep(10 * time.Millisecond) {
		select {
		case <-d.done:
			t.Fatalf("daemon %s exited before serving: %v\n%s", d.Addr, d.cmd.ProcessState, d.log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon %s not serving after 30 s:\n%s", d.Addr, d.log)
		}
	}
	return d
}

// Kill ends the daemon as a crash would (SIGKILL) and waits for it.
func (d *daemon) Kill() {
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.done
}

// Hang stops the daemon (SIGSTOP): its sockets stay open, nothing moves.
func (d *daemon) Hang() { d.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume undoes Hang.
func (d *daemon) Resume() { d.cmd.Process.Signal(syscall.SIGCONT) }

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
