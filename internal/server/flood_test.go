//go:build linux

package server

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/loaderd/loaderd/client/clienttest"
	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// The rapid-reset attacker runs in a child process, as a real one would:
// in the test's process its goroutines would share the scheduler with the
// normal client being measured.
const (
	resetFloodAddrEnv = "LOADERD_RESET_FLOOD_ADDR" // the daemon's address, in the child
	resetFloodSrcEnv  = "LOADERD_RESET_FLOOD_SRC"  // the address the child dials from
	resetFloodFor     = 2 * time.Second            // the normal client measures 1.5 s of it
	resetFloodRounds  = 3                          // floods, each between two quiet windows
	resetFloodWindow  = 1500 * time.Millisecond    // a window of the normal client's Opens
)

// floodOpen is what the attacker opens: batches of 1024 CIFAR-sized
// images in f32, 12 MiB, 4 in flight, 48 MiB of pool a stream. The normal
// client opens the same with batches of 256, so that its rate has a
// resolution of a few percent.
var (
	floodOpen  = &pb.Open{Dataset: "synth", BatchSize: 1024, MaxInFlight: 4, Augment: "out=f32:chw"}
	normalOpen = &pb.Open{Dataset: "synth", BatchSize: 256, MaxInFlight: 4, Augment: "out=f32:chw"}
)

// TestRapidResetFlood (issue 29, case 7): four connections open streams
// with an Open in each and reset them at once, from 32 goroutines each,
// against the real daemon under its default memory limit, while a normal
// client on its own connection opens streams and reads their first
// batch. It holds what must hold: the daemon's peak resident set stays
// under 2 GiB, every Open of the normal client succeeds, at a rate that
// is logged, and every stream logged as opened is logged as ended.
// LOADERD_FLOOD=1 also holds the rate to the goal, 80% of the
// quiet rate: a figure of timing, which a loaded machine would fail.
func TestRapidResetFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("a flood of seconds and 100k streams")
	}
	// On a machine of two cores or more the attacker gets a core of its
	// own, as one on another machine would, and the daemon and the normal
	// client the rest: the figure is then the daemon's, not the attacker
	// taking the daemon's CPU. Every thread is pinned (pinProcess): an
	// affinity set for one thread leaves the runtime's others, and their
	// children, on every core.
	pinned := runtime.NumCPU() >= 2
	var rest unix.CPUSet
	if pinned {
		var own unix.CPUSet
		if err := unix.SchedGetaffinity(0, &own); err == nil {
			for c := 1; c < runtime.NumCPU(); c++ {
				rest.Set(c)
			}
			if pinProcess(os.Getpid(), &rest) == nil {
				t.Cleanup(func() { pinProcess(os.Getpid(), &own) })
			} else {
				pinned = false
			}
		}
	}
	// Over TCP, where a remote attacker comes from: each round's attacker
	// from a loopback address of its own, the normal client from 127.0.0.1.
	d := clienttest.Start(t, "--dataset", "synth=synthetic:65536", "--workers", "2", "--log-level", "info", "--listen", "127.0.0.1:0")
	addr := d.TCPAddr(t)
	if pinned {
		if err := pinProcess(d.Pid(), &rest); err != nil {
			t.Logf("the daemon stays on every core: %v", err)
		}
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	normal := pb.NewLoaderClient(conn)
	// opens counts the normal client's Opens, each to its first batch, in
	// dur, and the mean time to the header and then to the batch.
	opens := func(dur time.Duration) (n int, toHeader, toBatch time.Duration) {
		for end := time.Now().Add(dur); time.Now().Before(end); n++ {
			ctx, cancel := context.WithCancel(context.Background())
			t0 := time.Now()
			st, err := openRaw(ctx, normal, normalOpen)
			t1 := time.Now()
			if err == nil {
				_, err = st.Recv()
			}
			toHeader, toBatch = toHeader+t1.Sub(t0), toBatch+time.Since(t1)
			cancel()
			if err != nil {
				t.Fatalf("a normal client's Open %d: %v", n, err)
			}
		}
		return n, toHeader / time.Duration(max(n, 1)), toBatch / time.Duration(max(n, 1))
	}
	// Quiet and flooded windows in turns, each flood between two quiet
	// windows it is compared with: this VM's speed drifts by a third from
	// one minute to the next, so a quiet rate measured once and a flooded
	// one after it say more of the drift than of the flood. Each flood is a
	// fresh attacker from an address of its own (127.0.0.2, .3, ...), so
	// that none starts under the penalty its predecessor earned.
	quiet, qh, qb := opens(resetFloodWindow)
	base := vmHWM(t, d.Pid())
	var shares []float64
	opened := quiet
	for r := range resetFloodRounds {
		attacker := exec.Command(os.Args[0], "-test.run=^TestRapidResetFloodChild$", "-test.v")
		attacker.Env = append(os.Environ(), resetFloodAddrEnv+"="+addr, resetFloodSrcEnv+"="+fmt.Sprintf("127.0.0.%d", 2+r))
		var out strings.Builder
		attacker.Stdout, attacker.Stderr = &out, &out
		if err := attacker.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond) // the flood under way
		flooded, fh, fb := opens(resetFloodWindow)
		if err := attacker.Wait(); err != nil {
			t.Fatalf("the attacker: %v\n%s", err, out.String())
		}
		after, ah, ab := opens(resetFloodWindow)
		share := 2 * float64(flooded) / float64(quiet+after)
		shares = append(shares, share)
		opened += flooded + after
		t.Logf("round %d: attacker %s; normal Opens %d → %d (flood) → %d in windows of %v: %.0f%% of the quiet windows' mean; "+
			"mean time to header %v → %v, then to the first batch %v → %v", r+1, strings.TrimSpace(lastLine(out.String(), "reset")),
			quiet, flooded, after, resetFloodWindow, 100*share, qh, fh, qb, fb)
		quiet, qh, qb = after, ah, ab
	}
	peak := vmHWM(t, d.Pid())
	share := median(shares)
	t.Logf("normal Opens during the floods: median %.0f%% of the quiet rate around them (rounds: %s%%)", 100*share, percents(shares))
	t.Logf("flood streams the daemon opened: %d; connections it closed as floods: %d", strings.Count(d.Log(), "stream opened")-opened,
		strings.Count(d.Log(), "closed a connection that reset streams"))
	t.Logf("daemon's peak resident set: %d MiB before the floods, %d MiB after (bound 2048 MiB)", base>>20, peak>>20)
	if peak > 2<<30 {
		t.Errorf("the daemon's resident set peaked at %d MiB, over 2 GiB", peak>>20)
	}
	// The rate is timing, which a loaded machine changes: logged always,
	// held to the goal on request.
	if os.Getenv("LOADERD_FLOOD") == "1" && share < 0.8 {
		t.Errorf("the normal client opened %.0f%% of its quiet rate during the floods, want ≥ 80%%", 100*share)
	}
	waitFor(t, func() bool {
		log := d.Log()
		return strings.Count(log, "stream opened") == strings.Count(log, "stream ended")
	})
}

// TestRapidResetFloodChild is TestRapidResetFlood's attacker; it does
// nothing in an ordinary test run.
func TestRapidResetFloodChild(t *testing.T) {
	addr := os.Getenv(resetFloodAddrEnv)
	if addr == "" {
		t.Skip("TestRapidResetFlood's attacker; runs only as its child")
	}
	var core0 unix.CPUSet
	core0.Set(0)
	pinProcess(os.Getpid(), &core0) // the attacker's own core (see TestRapidResetFlood)
	dialer := &net.Dialer{}
	if src := os.Getenv(resetFloodSrcEnv); src != "" {
		dialer.LocalAddr = &net.TCPAddr{IP: net.ParseIP(src)}
	}
	dial := func(ctx context.Context, addr string) (net.Conn, error) { return dialer.DialContext(ctx, "tcp", addr) }
	var sent atomic.Int64
	var wg sync.WaitGroup
	end := time.Now().Add(resetFloodFor)
	for range 4 {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithContextDialer(dial))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		api := pb.NewLoaderClient(c)
		for range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(end) {
					ctx, cancel := context.WithCancel(context.Background())
					if st, err := api.Stream(ctx); err == nil {
						st.Send(&pb.StreamRequest{Msg: &pb.StreamRequest_Open{Open: floodOpen}})
						sent.Add(1)
					}
					cancel() // RST_STREAM
				}
			}()
		}
	}
	wg.Wait()
	fmt.Printf("reset %d streams in %v\n", sent.Load(), resetFloodFor)
}

// pinProcess sets the affinity of every thread of process pid; threads
// made later inherit it from the thread that makes them.
func pinProcess(pid int, set *unix.CPUSet) error {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return err
	}
	for _, task := range tasks {
		tid, err := strconv.Atoi(task.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, set); err != nil && err != unix.ESRCH {
			return err
		}
	}
	return nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// percents formats shares as percentages.
func percents(xs []float64) string {
	var b strings.Builder
	for i, x := range xs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%.0f", 100*x)
	}
	return b.String()
}

// vmHWM returns process pid's peak resident set in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

func lastLine(s, prefix string) string {
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], prefix) {
			return lines[i]
		}
	}
	return ""
}
