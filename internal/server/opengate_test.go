package server

import (
	"context"
	"testing"
	"time"
)

// TestOpenGateTurns: with the gate full, waiters are served one
// connection at a time, so a connection with many waiters cannot hold
// back another's; a waiter whose context ends leaves, holding nothing.
func TestOpenGateTurns(t *testing.T) {
	g := newOpenGate(1)
	if err := g.acquire(context.Background(), "busy"); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 8)
	wait := func(conn string, ctx context.Context) {
		go func() {
			if err := g.acquire(ctx, conn); err != nil {
				got <- conn + " gave up"
				return
			}
			got <- conn
		}()
	}
	waitQueued := func(n int) { // until n waiters are queued
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			g.mu.Lock()
			k := 0
			for _, q := range g.conns {
				k += len(q.waiters)
			}
			g.mu.Unlock()
			if k == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d waiters queued, want %d", k, n)
			}
		}
	}
	for i := range 3 { // the flood's, queued first
		wait("flood", context.Background())
		waitQueued(i + 1)
	}
	ctx, cancel := context.WithCancel(context.Background())
	wait("quitter", ctx)
	waitQueued(4)
	wait("normal", context.Background())
	waitQueued(5)
	cancel()
	if c := <-got; c != "quitter gave up" {
		t.Fatalf("first out: %q, want the quitter giving up", c)
	}
	var order []string
	for range 4 {
		g.release()
		order = append(order, <-got)
	}
	want := []string{"flood", "normal", "flood", "flood"}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("served %v, want %v", order, want)
		}
	}
	g.release()
	if g.free != 1 || len(g.ring) != 0 || len(g.conns) != 0 {
		t.Fatalf("after all releases: free %d, ring %d, conns %d", g.free, len(g.ring), len(g.conns))
	}
}
