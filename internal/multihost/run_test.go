//go:build linux && !race

package multihost

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loaderd/loaderd/client/clienttest"
)

// batchRec is one delivered batch as the trainer saw it.
type batchRec struct {
	Seq          int
	Epoch, Index int64
	Hash         string
}

// event is a pool event, with how many batches had arrived before it.
type event struct {
	Kind, Addr, Detail string
	After              int
	seen               bool // taken by WaitEvent
}

// trainer is the parent's handle on a trainer process: it reads the
// child's lines (see trainerMain) and drives its pauses.
type trainer struct {
	t         *testing.T
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	lines     chan string
	stderr    *clienttest.LockedBuffer
	deadline  time.Time
	Batches   []batchRec
	Events    []event
	Proxy     string        // the fault proxy's address, if any
	Members   []memberStat  // the pool's latest view (Snapshot, and at the end)
	members   []memberStat  // the view being read
	MaxWait   time.Duration // the longest wait in Next
	MaxWaitAt int
	stuck     bool   // a W line came
	waiting   string // what the test waits for, for the failure message
	done      bool
}

// runLimit bounds one trainer run: a stuck one fails the test.
const runLimit = 90 * time.Second

// startTrainer runs the trainer in n's trainer namespace with env
// (MULTIHOST_ names less the prefix: TARGET, REACH, MARKS, PROXY,
// FAILOVER, RESOLVE).
func startTrainer(t *testing.T, n *network, env map[string]string) *trainer {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tr := &trainer{t: t, lines: make(chan string, 64), stderr: &clienttest.LockedBuffer{}, deadline: time.Now().Add(runLimit), waiting: "the end of the stream"}
	tr.cmd = n.Command(n.Trainer.NS, self, "-test.run=^$")
	tr.cmd.Env = append(os.Environ(), "MULTIHOST_ROLE=trainer")
	for k, v := range env {
		tr.cmd.Env = append(tr.cmd.Env, "MULTIHOST_"+k+"="+v)
	}
	tr.cmd.Stderr = tr.stderr
	if tr.stdin, err = tr.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := tr.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(tr.lines)
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			tr.lines <- s.Text()
		}
	}()
	t.Cleanup(func() {
		tr.cmd.Process.Kill()
		tr.cmd.Wait()
	})
	return tr
}

// read takes the child's next line and records it; it fails the test
// when the child fails, ends early or overruns runLimit.
func (tr *trainer) read() string {
	tr.t.Helper()
	var line string
	var ok bool
	select {
	case line, ok = <-tr.lines:
	case <-time.After(time.Until(tr.deadline)):
		tr.fatalf("trainer: %s did not come in time (a run gets %v, an event %v)", tr.waiting, runLimit, eventWithin)
	}
	if !ok {
		tr.fatalf("trainer ended without finishing its stream")
	}
	kind, rest, _ := strings.Cut(line, " ")
	f := strings.Fields(rest)
	switch kind {
	case "B":
		if len(f) != 4 {
			tr.fatalf("bad line %q", line)
		}
		var b batchRec
		b.Seq, _ = strconv.Atoi(f[0])
		b.Epoch, _ = strconv.ParseInt(f[1], 10, 64)
		b.Index, _ = strconv.ParseInt(f[2], 10, 64)
		b.Hash = f[3]
		tr.Batches = append(tr.Batches, b)
	case "E":
		e := event{After: len(tr.Batches)}
		e.Kind, rest, _ = strings.Cut(rest, " ")
		e.Addr, e.Detail, _ = strings.Cut(rest, " ")
		tr.Events = append(tr.Events, e)
		tr.t.Logf("after %d batches: pool event %s %s %s", e.After, e.Kind, e.Addr, e.Detail)
	case "Q":
		if f[0] == "-" {
			tr.Members, tr.members = tr.members, nil
			break
		}
		if len(f) != 6 {
			tr.fatalf("bad line %q", line)
		}
		made, _ := strconv.ParseInt(f[2], 10, 64)
		us, _ := strconv.ParseInt(f[5], 10, 64)
		tr.members = append(tr.members, memberStat{Addr: f[0], Up: f[1] == "true", Made: made, Connects: atoi(f[3]),
			Outstanding: atoi(f[4]), BatchTime: time.Duration(us) * time.Microsecond})
	case "P":
		tr.Proxy = rest
	case "S":
		us, _ := strconv.ParseInt(f[0], 10, 64)
		tr.MaxWait, tr.MaxWaitAt = time.Duration(us)*time.Microsecond, atoi(f[1])
	case "W":
		tr.stuck = true
	case "D":
		tr.done = true
	case "X":
		tr.fatalf("trainer failed: %s", rest)
	}
	return line
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

func (tr *trainer) fatalf(format string, a ...any) {
	tr.t.Helper()
	tr.t.Fatalf("%s\ntrainer's stderr:\n%s", fmt.Sprintf(format, a...), tr.stderr)
}

// Pause reads up to the pause before batch seq: the child waits there
// until Go.
func (tr *trainer) Pause(seq int) {
	tr.t.Helper()
	want := fmt.Sprintf("M %d", seq)
	for tr.read() != want {
	}
}

// Go sends commands at a pause, then lets the trainer go on.
func (tr *trainer) Go(cmds ...string) {
	tr.t.Helper()
	for _, c := range append(cmds, "go") {
		if _, err := io.WriteString(tr.stdin, c+"\n"); err != nil {
			tr.fatalf("trainer's stdin: %v", err)
		}
	}
}

// Since is a mark in the events: what WaitEvent looks at from.
func (tr *trainer) Since() int { return len(tr.Events) }

// WaitEvent returns the first event of kind about addr ("": any) since
// the mark and not taken before, reading on until one comes; it fails the
// test after within.
func (tr *trainer) WaitEvent(since int, kind, addr string, within time.Duration) event {
	tr.t.Helper()
	deadline, waiting := tr.deadline, tr.waiting
	tr.deadline, tr.waiting = time.Now().Add(within), fmt.Sprintf("a %q event for %q", kind, addr)
	defer func() { tr.deadline, tr.waiting = deadline, waiting }()
	for i := since; ; tr.read() {
		for ; i < len(tr.Events); i++ {
			if e := &tr.Events[i]; !e.seen && e.Kind == kind && (addr == "" || e.Addr == addr) {
				e.seen = true
				return *e
			}
		}
		if tr.done {
			tr.fatalf("the stream ended with no %q event for %s", kind, addr)
		}
	}
}

// WaitStuck reads on until the trainer says it waits for a batch, i.e.
// it has used up what the pool received.
func (tr *trainer) WaitStuck() {
	tr.t.Helper()
	for !tr.stuck {
		if tr.done {
			tr.fatalf("the stream ended and the trainer never waited for a batch")
		}
		tr.read()
	}
}

// Finish reads to the end of the stream and waits for the trainer.
func (tr *trainer) Finish() {
	tr.t.Helper()
	for !tr.done {
		tr.read()
	}
	tr.stdin.Close()
	if err := tr.cmd.Wait(); err != nil {
		tr.fatalf("trainer: %v", err)
	}
}

// Snapshot has the trainer, at a pause, report the pool's view of its
// daemons.
func (tr *trainer) Snapshot() []memberStat {
	tr.t.Helper()
	if _, err := io.WriteString(tr.stdin, "pool\n"); err != nil {
		tr.fatalf("trainer's stdin: %v", err)
	}
	for tr.read() != "Q -" {
	}
	return tr.Members
}

// Quiet takes snapshots, at a pause, until the pool owes nothing: it has
// filled every buffer the paused trainer left it.
func (tr *trainer) Quiet() []memberStat {
	tr.t.Helper()
	for deadline := time.Now().Add(eventWithin); ; time.Sleep(10 * time.Millisecond) {
		view, owed := tr.Snapshot(), 0
		for _, m := range view {
			owed += m.Outstanding
		}
		if owed == 0 {
			return view
		}
		if time.Now().After(deadline) {
			tr.fatalf("the pool still owes %d batches to a paused trainer after %v: %+v", owed, eventWithin, view)
		}
	}
}

// Member is addr in the latest view.
func (tr *trainer) Member(addr string) memberStat {
	for _, m := range tr.Members {
		if m.Addr == addr {
			return m
		}
	}
	return memberStat{Addr: addr}
}

// reference is the stream one daemon alone delivers, on a Unix socket
// with the plain client: what every pool must reproduce.
func reference(t *testing.T) []batchRec {
	t.Helper()
	d := clienttest.Start(t, "--dataset", dataset, "--workers", "1")
	c := d.Dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := c.Open(ctx, streamConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var ref []batchRec
	for {
		b, err := s.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ref = append(ref, batchRec{Seq: int(b.Seq), Epoch: b.Epoch, Index: b.Index, Hash: hashBatch(b)})
		b.Release()
	}
	if len(ref) != total {
		t.Fatalf("the single daemon gave %d batches, want %d", len(ref), total)
	}
	return ref
}

// sameStream fails t unless got is ref: the same batches, bytes and
// order, none missing, none twice.
func sameStream(t *testing.T, ref, got []batchRec) {
	t.Helper()
	first := map[[2]int64]int{}
	for i, b := range got {
		k := [2]int64{b.Epoch, b.Index}
		if j, dup := first[k]; dup {
			t.Errorf("epoch %d batch %d delivered twice: at %d and at %d", b.Epoch, b.Index, j, i)
			return
		}
		first[k] = i
	}
	for i := range min(len(ref), len(got)) {
		r, g := ref[i], got[i]
		if g.Seq != i || g.Epoch != r.Epoch || g.Index != r.Index || g.Hash != r.Hash {
			t.Errorf("batch %d differs: got seq %d epoch %d index %d sha256 %.16s, one daemon gave epoch %d index %d sha256 %.16s",
				i, g.Seq, g.Epoch, g.Index, g.Hash, r.Epoch, r.Index, r.Hash)
			return
		}
	}
	if len(got) != len(ref) {
		t.Errorf("got %d batches, one daemon gave %d", len(got), len(ref))
	}
}
