package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/loaderd/loaderd/client"
	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// runDaemon runs Run on a Unix socket in a world-traversable directory
// and returns the socket path.
func runDaemon(t *testing.T, mode os.FileMode) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "loaderd-sock-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "loaderd.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ready := make(chan struct{})
	go func() {
		done <- Run(ctx, Config{Unix: sock, UnixMode: mode, Datasets: []string{"synth=synthetic:2000"}, Workers: 2,
			ShutdownTimeout: 5 * time.Second, MemoryLimit: 1 << 30, OnError: "fail"},
			slog.New(slog.DiscardHandler), func([]string) { close(ready) })
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return sock
}

// batchSums reads n batches over the transport asked for and returns
// their hashes and the stream's header.
func batchSums(addr string, shm bool, n int) ([][32]byte, *pb.StreamHeader, error) {
	c, err := client.Dial(addr)
	if err != nil {
		return nil, nil, err
	}
	defer c.Close()
	ctx := context.Background()
	s, err := c.Open(ctx, client.StreamConfig{Dataset: "synth", BatchSize: 64, Seed: 9, SharedMemory: shm, Epochs: 1})
	if err != nil {
		return nil, nil, err
	}
	defer s.Close()
	var sums [][32]byte
	for len(sums) < n {
		b, err := s.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		sums = append(sums, sha256.Sum256(b.Data))
		b.Release()
	}
	return sums, s.Header(), nil
}

// TestShmHandOver: a shared-memory client on the Unix socket gets its
// region over the hand-over socket, read-only, and sees the same bytes as
// an inline client; nobody can write into the region, through any path.
func TestShmHandOver(t *testing.T) {
	sock := runDaemon(t, 0o660)
	for _, p := range []string{sock, fdSocketPath(sock)} {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() != 0o660 || fi.Mode().Type() != os.ModeSocket {
			t.Fatalf("%s: %v, %v; want a socket of mode 0660", p, fi.Mode(), err)
		}
	}
	addr := "unix://" + sock
	want, _, err := batchSums(addr, false, 1000)
	if err != nil {
		t.Fatal(err)
	}
	got, h, err := batchSums(addr, true, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if h.GetShm().GetFdSocket() != filepath.Base(fdSocketPath(sock)) || len(h.GetShm().GetToken()) != tokenLen {
		t.Fatalf("header's hand-over socket %q, token of %d bytes", h.GetShm().GetFdSocket(), len(h.GetShm().GetToken()))
	}
	if len(got) != len(want) {
		t.Fatalf("shm gave %d batches, inline %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("batch %d differs between shm and inline", i)
		}
	}
	// A wrong token gets a clear refusal, no descriptor.
	if f, err := fetchTestRegion(fdSocketPath(sock), make([]byte, tokenLen)); err == nil || f != nil {
		t.Fatalf("a made-up token got a region (%v)", err)
	}
}

// fetchTestRegion runs the hand-over exchange by hand and returns the
// daemon's refusal as an error.
func fetchTestRegion(path string, tok []byte) (*os.File, error) {
	conn, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(conn)
	if err := unix.Connect(conn, &unix.SockaddrUnix{Name: path}); err != nil {
		return nil, err
	}
	if _, err := unix.Write(conn, append([]byte{byte(len(tok))}, tok...)); err != nil {
		return nil, err
	}
	buf, oob := make([]byte, 256), make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(conn, buf, oob, 0)
	if err != nil {
		return nil, err
	}
	if oobn > 0 {
		return nil, errors.New("a descriptor came with the refusal")
	}
	if n == 0 || buf[0] == 0 {
		return nil, errors.New("no refusal")
	}
	return nil, fmt.Errorf("%s", buf[1:n])
}

// TestShmIsolation: a process of the daemon's own user that reaches
// another stream's memfd through /proc cannot write into it by any means,
// and that stream's batches stay what an inline stream of the same plan
// delivers: 0 of them changed.
func TestShmIsolation(t *testing.T) {
	sock := runDaemon(t, 0o660)
	addr := "unix://" + sock
	want, _, err := batchSums(addr, false, 1000)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	s, err := c.Open(ctx, client.StreamConfig{Dataset: "synth", BatchSize: 64, Seed: 9, SharedMemory: true, Epochs: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	path := s.Header().GetShm().GetPath()
	attack := func() {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatalf("open %s read-write: %v (the daemon's own user may open it)", path, err)
		}
		defer f.Close()
		size := int(s.Header().GetShm().GetSize())
		if b, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err == nil {
			for i := range b {
				b[i] = 0xEE
			}
			unix.Munmap(b)
			t.Error("mapped another stream's region writable and shared")
		}
		if _, err := f.WriteAt(make([]byte, 4096), 0); err == nil {
			t.Error("wrote into another stream's region")
		}
		if err := f.Truncate(0); err == nil {
			t.Error("truncated another stream's region")
		}
	}
	changed := 0
	for i := 0; ; i++ {
		// Once the last batch is acked the daemon may end the stream and
		// close its region, so the attacks stop there.
		if i < len(want) {
			attack()
		}
		b, err := s.Next(ctx)
		if err == io.EOF {
			if i != len(want) {
				t.Fatalf("%d batches over shm, %d inline", i, len(want))
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if sha256.Sum256(b.Data) != want[i] {
			changed++
		}
		b.Release()
	}
	if changed != 0 {
		t.Fatalf("%d of %d batches changed", changed, len(want))
	}
}

// TestShmAcrossNamespacesAndUsers runs a shared-memory client in another
// PID namespace (it cannot see the daemon's /proc) and as another user:
// both get their region through the socket and read the same bytes as
// inline; the other user cannot open the daemon's /proc path. Needs root
// (CI runs as root); elsewhere it says why it cannot run.
func TestShmAcrossNamespacesAndUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for unshare --pid and setpriv (CI runs as root)")
	}
	sock := runDaemon(t, 0o666)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The test binary, where another user may run it.
	bin := filepath.Join(filepath.Dir(sock), "child.test")
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, wrap := range [][]string{
		{"unshare", "--pid", "--fork", "--mount-proc"},
		{"setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"},
	} {
		t.Run(wrap[0], func(t *testing.T) {
			cmd := exec.Command(wrap[0], append(wrap[1:], bin, "-test.run", "^TestShmChild$", "-test.v")...)
			cmd.Env = append(os.Environ(), "LOADERD_SHM_CHILD=unix://"+sock, "LOADERD_DAEMON_PID="+strconv.Itoa(os.Getpid()))
			out, err := cmd.CombinedOutput()
			if err != nil || !bytes.Contains(out, []byte("--- PASS: TestShmChild")) {
				t.Fatalf("child under %s: %v\n%s", wrap[0], err, out)
			}
		})
	}
}

// TestShmChild is the client half of TestShmAcrossNamespacesAndUsers, run
// in a child process; alone it has nothing to do.
func TestShmChild(t *testing.T) {
	addr := os.Getenv("LOADERD_SHM_CHILD")
	if addr == "" {
		t.Skip("the child of TestShmAcrossNamespacesAndUsers")
	}
	want, _, err := batchSums(addr, false, 8)
	if err != nil {
		t.Fatal(err)
	}
	got, h, err := batchSums(addr, true, 8)
	if err != nil {
		t.Fatal(err)
	}
	if h.GetTransport() != pb.Transport_TRANSPORT_SHM || len(got) != len(want) {
		t.Fatalf("transport %v, %d batches (inline %d)", h.GetTransport(), len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("batch %d differs", i)
		}
	}
	// The daemon's /proc path is out of reach: another namespace does not
	// see the daemon's PID; another user may not open its descriptors.
	if f, err := os.Open(h.GetShm().GetPath()); err == nil {
		f.Close()
		if os.Getuid() != 0 {
			t.Fatalf("user %d opened the daemon's %s", os.Getuid(), h.GetShm().GetPath())
		}
	}
}
