//go:build linux && !race

package multihost

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loaderd/loaderd/client"
)

// TestMain doubles as the trainer: the parent runs the test binary again
// inside the trainer's namespace with MULTIHOST_ROLE=trainer.
func TestMain(m *testing.M) {
	if os.Getenv("MULTIHOST_ROLE") == "trainer" {
		if err := trainerMain(); err != nil {
			out.line("X %s", strings.ReplaceAll(err.Error(), "\n", " | "))
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// The stream every scenario reads: two epochs of 128 batches of 8.
const (
	batchSize = 8
	epochs    = 2
	perEpoch  = 1024 / batchSize
	total     = epochs * perEpoch
	// pace is the trainer's step: the stream runs long enough for the
	// faults, and the pool has batches outstanding when they land.
	pace = 5 * time.Millisecond
	// stuckAfter is a wait in Next that says the trainer has used up what
	// the pool had received: what a test waits for before it lets a
	// daemon come back.
	stuckAfter = 500 * time.Millisecond
)

func streamConfig() client.StreamConfig {
	return client.StreamConfig{Dataset: "train", BatchSize: batchSize, Seed: 42, Epochs: epochs, Name: "multihost"}
}

// hashBatch is the fingerprint of what a trainer consumes of a batch.
func hashBatch(b *client.Batch) string {
	h := sha256.New()
	binary.Write(h, binary.LittleEndian, b.Indices)
	binary.Write(h, binary.LittleEndian, b.Labels)
	h.Write(b.Data)
	return hex.EncodeToString(h.Sum(nil))
}

// printer writes the trainer's protocol lines, one write each, from the
// loop and from the pool's event callback.
type printer struct{ mu sync.Mutex }

var out printer

func (p *printer) line(format string, a ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(os.Stdout, format+"\n", a...)
}

// trainerMain reads one rank's stream and reports it on stdout, a line
// each:
//
//	P ADDR                       the fault proxy listens on ADDR
//	E KIND ADDR DETAIL           a pool event
//	M SEQ                        paused before batch SEQ; waits on stdin
//	W SEQ                        Next has waited stuckAfter for batch SEQ
//	B SEQ EPOCH INDEX HASH       a batch
//	Q ADDR UP MADE CONNECTS OUTSTANDING BATCH_US
//	                             the pool's view of a daemon; "Q -" ends the list
//	S WAIT_US SEQ                the longest wait in Next, and before which batch
//	D                            the end of the stream
//	X ERROR                      failed
//
// At a pause stdin gives commands until "go": "pool" (print the Q lines)
// and "stall DURATION" (the proxy's connections stop that long).
func trainerMain() error {
	env := func(k string) string { return os.Getenv("MULTIHOST_" + k) }
	target := env("TARGET")
	var proxy *faultProxy
	if to := env("PROXY"); to != "" {
		var err error
		if proxy, err = startProxy(to); err != nil {
			return err
		}
		out.line("P %s", proxy.Addr())
		target = strings.ReplaceAll(target, "PROXY", proxy.Addr())
	}
	for _, a := range strings.Split(env("REACH"), ",") {
		if err := reach(a); err != nil {
			return err
		}
	}
	marks := map[int]bool{}
	for _, m := range strings.Split(env("MARKS"), ",") {
		if n, err := strconv.Atoi(m); err == nil {
			marks[n] = true
		}
	}
	failover, _ := time.ParseDuration(env("FAILOVER"))
	resolve, _ := time.ParseDuration(env("RESOLVE"))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.Dial(target)
	if err != nil {
		return err
	}
	defer c.Close()
	cfg := streamConfig()
	withPool(&cfg, failover, resolve, func(kind, addr, detail string) {
		out.line("E %s %s %s", kind, addr, strings.ReplaceAll(detail, "\n", " | "))
	})
	s, err := c.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	stdin := bufio.NewScanner(os.Stdin)
	var longest time.Duration
	longestAt := 0
	for seq := 0; ; seq++ {
		if marks[seq] {
			out.line("M %d", seq)
			if err := obey(stdin, s, proxy); err != nil {
				return err
			}
		}
		t0 := time.Now()
		stuck := time.AfterFunc(stuckAfter, func() { out.line("W %d", seq) })
		b, err := s.Next(ctx)
		stuck.Stop()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("batch %d: %w", seq, err)
		}
		if w := time.Since(t0); w > longest {
			longest, longestAt = w, seq
		}
		out.line("B %d %d %d %s", b.Seq, b.Epoch, b.Index, hashBatch(b))
		time.Sleep(pace)
		if err := b.Release(); err != nil {
			return fmt.Errorf("release %d: %w", seq, err)
		}
	}
	printPool(s)
	out.line("S %d %d", longest.Microseconds(), longestAt)
	out.line("D")
	return nil
}

// obey follows the parent's commands at a pause until "go".
func obey(in *bufio.Scanner, s *client.Stream, proxy *faultProxy) error {
	for in.Scan() {
		cmd, arg, _ := strings.Cut(in.Text(), " ")
		switch cmd {
		case "go":
			return nil
		case "pool":
			printPool(s)
		case "stall":
			d, err := time.ParseDuration(arg)
			if err != nil || proxy == nil {
				return fmt.Errorf("bad command %q (proxy %v)", in.Text(), proxy != nil)
			}
			proxy.Stall(d)
		default:
			return fmt.Errorf("unknown command %q", in.Text())
		}
	}
	return fmt.Errorf("stdin closed at a pause: %v", in.Err())
}

func printPool(s *client.Stream) {
	for _, m := range members(s) {
		out.line("Q %s %t %d %d %d %d", m.Addr, m.Up, m.Made, m.Connects, m.Outstanding, m.BatchTime.Microseconds())
	}
	out.line("Q -")
}

// reach waits until addr accepts a connection: a fresh veth and bridge
// port may take a moment to pass packets.
func reach(addr string) error {
	if addr == "" {
		return nil
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return c.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s unreachable from the trainer: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
