//go:build linux && !race

package multihost

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	// failover is how long the pool lets a daemon with batches
	// outstanding stay silent; below the default to keep CI quick.
	failover = time.Second
	resolve  = time.Second
	// faultAt is the batch before which a fault lands (the trainer waits
	// there while the test injects it), mid-epoch 0; healAt the one
	// before which it ends, mid-epoch 1, so recovery spans the boundary.
	faultAt = 64
	healAt  = 160
	// eventWithin bounds the wait for a pool event; Go's resolver alone
	// takes up to 5 s to see /etc/hosts change.
	eventWithin = 30 * time.Second
	// maxRecovery bounds the longest wait in Next around a fault: the
	// pool must ask the others within a few seconds.
	maxRecovery = failover + 9*time.Second
)

// TestPool plays a trainer reading one rank's stream from a pool of
// three daemons on separate network stacks while one of them fails, and
// checks it gets what one daemon alone gives, byte for byte.
func TestPool(t *testing.T) {
	requireNetns(t)
	ref := reference(t)

	// The baseline, with the client of one daemon, which resumes on its
	// own when its daemon restarts: what the pool scenarios build on
	// works here.
	t.Run("one-daemon", func(t *testing.T) {
		n := newNetwork(t, 1)
		d := startDaemon(t, n, 0)
		tr := startTrainer(t, n, map[string]string{"TARGET": n.Addr(0), "REACH": n.Addr(0), "MARKS": strconv.Itoa(faultAt)})
		tr.Pause(faultAt)
		d.Kill()
		startDaemon(t, n, 0)
		tr.Go()
		tr.Finish()
		sameStream(t, ref, tr.Batches)
		recovered(t, tr, 0)
	})

	for _, sc := range []struct {
		name string
		run  func(*testing.T, []batchRec)
	}{
		{"kill", testKill},
		{"partition", testPartition},
		{"hang", testHang},
		{"add", testAdd},
		{"add-dns", testAddDNS},
		{"proxy", testProxy},
		{"netem", testNetem},
		{"all-down", testAllDown},
	} {
		t.Run(sc.name, func(t *testing.T) { sc.run(t, ref) })
	}
}

// pool is a network of three daemon hosts with daemons on the first up.
func pool(t *testing.T, up int) (*network, []*daemon) {
	n := newNetwork(t, 3)
	var ds []*daemon
	for i := range up {
		ds = append(ds, startDaemon(t, n, i))
	}
	return n, ds
}

// poolEnv is the trainer's environment for target, waiting for reach.
func poolEnv(target string, reach []string, marks ...int) map[string]string {
	var m []string
	for _, k := range marks {
		m = append(m, strconv.Itoa(k))
	}
	return map[string]string{"TARGET": target, "REACH": strings.Join(reach, ","), "MARKS": strings.Join(m, ","),
		"FAILOVER": failover.String(), "RESOLVE": resolve.String()}
}

// recovered logs the longest stall and the pool's view of its daemons,
// and fails t past bound (if not 0).
func recovered(t *testing.T, tr *trainer, bound time.Duration) {
	t.Helper()
	t.Logf("recovery: the longest wait in Next was %v, before batch %d", tr.MaxWait.Round(time.Millisecond), tr.MaxWaitAt)
	for _, m := range tr.Members {
		t.Logf("pool at the end: %s up %t, made %d batches, %d connects", m.Addr, m.Up, m.Made, m.Connects)
	}
	if bound > 0 && tr.MaxWait > bound {
		t.Errorf("the trainer waited %v for a batch; the pool should recover within %v", tr.MaxWait, bound)
	}
}

// tookWork fails t unless addr made more than before batches by the end.
func tookWork(t *testing.T, tr *trainer, addr string, before int64) {
	t.Helper()
	if made := tr.Member(addr).Made; made <= before {
		t.Errorf("%s made no batches after it came (back): %d before, %d at the end", addr, before, made)
	} else {
		t.Logf("%s made %d batches after it came (back)", addr, made-before)
	}
}

// victim is, at a pause, the daemon the pool will ask first when the
// trainer goes on, so that a fault there finds batches owed: a silent
// daemon that is never asked is never missed.
func victim(t *testing.T, tr *trainer, n *network) int {
	t.Helper()
	view := tr.Quiet()
	addr := nextAsked(view)
	for i := range n.Daemons {
		if n.Addr(i) == addr {
			t.Logf("the fault hits %s, the pool's fastest: %+v", addr, view)
			return i
		}
	}
	t.Fatalf("no daemon up to fault: %+v", view)
	return 0
}

// testKill: a daemon crashes (SIGKILL) mid-epoch.
func testKill(t *testing.T, ref []batchRec) {
	n, ds := pool(t, 3)
	tr := startTrainer(t, n, poolEnv(poolTarget(n.Addrs()...), n.Addrs(), faultAt))
	tr.Pause(faultAt)
	mark, v := tr.Since(), victim(t, tr, n)
	ds[v].Kill()
	tr.Go()
	tr.WaitEvent(mark, "down", n.Addr(v), eventWithin)
	tr.Finish()
	sameStream(t, ref, tr.Batches)
	recovered(t, tr, maxRecovery)
}

// testPartition: a daemon's cable is pulled at the switch mid-epoch (no
// reset reaches either side), and plugged back later.
func testPartition(t *testing.T, ref []batchRec) {
	testSilent(t, ref, func(n *network, _ *daemon, i int) { n.SetLink(i, false) },
		func(n *network, _ *daemon, i int) { n.SetLink(i, true) })
}

// testHang: a daemon stops (SIGSTOP) mid-epoch, its connections open and
// silent, and continues later.
func testHang(t *testing.T, ref []batchRec) {
	testSilent(t, ref, func(_ *network, d *daemon, _ int) { d.Hang() },
		func(_ *network, d *daemon, _ int) { d.Resume() })
}

// testSilent: a fault silences a daemon mid-epoch, with nothing to tell
// the pool but silence; the pool drops it and moves what it owed. Later
// heal undoes it: the pool takes the daemon back and gives it work.
func testSilent(t *testing.T, ref []batchRec, fault, heal func(*network, *daemon, int)) {
	n, ds := pool(t, 3)
	tr := startTrainer(t, n, poolEnv(poolTarget(n.Addrs()...), n.Addrs(), faultAt, healAt))
	tr.Pause(faultAt)
	mark, v := tr.Since(), victim(t, tr, n)
	fault(n, ds[v], v)
	tr.Go()
	tr.Pause(healAt)
	tr.WaitEvent(mark, "down", n.Addr(v), eventWithin)
	tr.Snapshot()
	before := tr.Member(n.Addr(v)).Made
	heal(n, ds[v], v)
	tr.WaitEvent(mark, "up", n.Addr(v), eventWithin)
	tr.Go()
	tr.Finish()
	sameStream(t, ref, tr.Batches)
	recovered(t, tr, maxRecovery)
	tookWork(t, tr, n.Addr(v), before)
}

// testAdd: the third address is listed but serves nothing until
// mid-epoch; then it takes work.
func testAdd(t *testing.T, ref []batchRec) {
	n, _ := pool(t, 2)
	tr := startTrainer(t, n, poolEnv(poolTarget(n.Addrs()...), n.Addrs()[:2], faultAt))
	tr.Pause(faultAt)
	mark := tr.Since()
	startDaemon(t, n, 2)
	tr.WaitEvent(mark, "up", n.Addr(2), eventWithin)
	tr.Go()
	tr.Finish()
	sameStream(t, ref, tr.Batches)
	recovered(t, tr, 0)
	tookWork(t, tr, n.Addr(2), 0)
}

// testAddDNS: the pool is a name, loaderd-pool, of two addresses in the
// trainer's /etc/hosts; mid-epoch a third is added to it.
func testAddDNS(t *testing.T, ref []batchRec) {
	n, _ := pool(t, 3)
	n.Hosts(n.Daemons[0].IP+" loaderd-pool", n.Daemons[1].IP+" loaderd-pool")
	tr := startTrainer(t, n, poolEnv("dns:///loaderd-pool:"+daemonPort, n.Addrs(), faultAt))
	tr.Pause(faultAt)
	mark := tr.Since()
	n.Hosts(n.Daemons[2].IP + " loaderd-pool")
	tr.WaitEvent(mark, "up", n.Addr(2), eventWithin)
	tr.Go()
	tr.Finish()
	sameStream(t, ref, tr.Batches)
	recovered(t, tr, 0)
	tookWork(t, tr, n.Addr(2), 0)
}

// testProxy: the third daemon sits behind the fault proxy (20 ms a
// chunk, hiccups), which stalls it for three failovers mid-epoch. The
// pool, which asks more of faster daemons, may or may not be waiting on
// it then; either way the epoch must come out whole.
func testProxy(t *testing.T, ref []batchRec) {
	n, _ := pool(t, 3)
	env := poolEnv(poolTarget(n.Addr(0), n.Addr(1), "PROXY"), n.Addrs(), faultAt)
	env["PROXY"] = n.Addr(2)
	tr := startTrainer(t, n, env)
	tr.Pause(faultAt)
	tr.Go("stall " + (3 * failover).String())
	tr.Finish()
	sameStream(t, ref, tr.Batches)
	recovered(t, tr, maxRecovery)
	t.Logf("%s is %s behind the proxy", tr.Proxy, n.Addr(2))
}

// testNetem: the third daemon's link has 20 ms of delay and 1% loss each
// way, where the kernel has sch_netem.
func testNetem(t *testing.T, ref []batchRec) {
	n := newNetwork(t, 3)
	if err := n.Netem(2, "delay 20ms loss 1%"); err != nil {
		t.Skipf("no tc-netem here (the proxy scenario stands in): %v", err)
	}
	for i := range 3 {
		startDaemon(t, n, i)
	}
	tr := startTrainer(t, n, poolEnv(poolTarget(n.Addrs()...), n.Addrs()))
	tr.Finish()
	sameStream(t, ref, tr.Batches)
	recovered(t, tr, maxRecovery)
}

// testAllDown: every daemon is killed mid-epoch; the pool says so, naming
// each; the trainer uses up what was received and waits; and the stream
// resumes when one daemon comes back.
func testAllDown(t *testing.T, ref []batchRec) {
	n, ds := pool(t, 3)
	tr := startTrainer(t, n, poolEnv(poolTarget(n.Addrs()...), n.Addrs(), faultAt))
	tr.Pause(faultAt)
	mark := tr.Since()
	for _, d := range ds {
		d.Kill()
	}
	tr.Go()
	for _, a := range n.Addrs() {
		tr.WaitEvent(mark, "down", a, eventWithin)
	}
	all := tr.WaitEvent(mark, "alldown", "", eventWithin)
	for _, a := range n.Addrs() {
		if !slices.Contains(strings.Split(all.Addr, ","), a) {
			t.Errorf("the all-down event does not name %s: %q", a, all.Addr)
		}
	}
	tr.WaitStuck()
	startDaemon(t, n, 0)
	tr.WaitEvent(mark, "up", n.Addr(0), eventWithin)
	tr.Finish()
	sameStream(t, ref, tr.Batches)
	recovered(t, tr, 0)
}
