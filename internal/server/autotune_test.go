package server

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// tick is one controller tick: what it measured, and the active count it
// must choose. The active count measured is the previous tick's choice.
type tick struct {
	wait, busy float64
	want       int
}

func repeat(n int, t tick) []tick {
	out := make([]tick, n)
	for i := range out {
		out[i] = t
	}
	return out
}

func ticks(parts ...[]tick) []tick {
	var out []tick
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// TestTunerDecisions drives the controller tick by tick. With the default
// config: grow above 2% wait when the active workers are at least 75%
// busy; calm is at most 0.5% wait; shrink after 4 calm ticks if the rest
// would be at most 120% busy (busy is wall time, inflated by preemption);
// one settling tick after each change.
func TestTunerDecisions(t *testing.T) {
	cases := []struct {
		name  string
		max   int
		start int
		ticks []tick
	}{
		{"waiting clients and busy workers grow", 4, 1, []tick{{0.10, 0.95, 2}}},
		{"growth goes on while clients wait", 4, 1, []tick{{0.10, 0.95, 2}, {0.10, 1.9, 2}, {0.10, 1.9, 3}, {0.1, 2.8, 3}, {0.1, 2.8, 4}}},
		{"clients stalled a quarter of the time grow by half", 16, 8, []tick{{0.40, 7.9, 12}}},
		{"waiting clients and idle workers: not a worker shortage", 4, 2, repeat(8, tick{0.20, 0.8, 2})},
		{"bound: no more than max", 4, 4, repeat(3, tick{0.50, 4, 4})},
		{"bound: a grow stops at max", 4, 3, []tick{{0.50, 3, 4}}},
		{"idle workers and no wait shrink after 4 calm ticks", 4, 3, ticks(repeat(3, tick{0, 0.5, 3}), []tick{{0, 0.5, 2}})},
		{"and go on shrinking to the least", 4, 3, ticks(repeat(3, tick{0, 0.2, 3}), []tick{{0, 0.2, 2}},
			repeat(4, tick{0, 0.2, 2}), []tick{{0, 0.2, 1}}, repeat(10, tick{0, 0.2, 1}))},
		{"bound: an idle daemon keeps one worker", 4, 1, repeat(10, tick{0, 0, 1})},
		{"no shrink when the rest would be over 120% busy", 4, 2, repeat(10, tick{0, 1.3, 2})},
		{"shrink when the rest would be 90% busy", 4, 2, ticks(repeat(3, tick{0, 0.9, 2}), []tick{{0, 0.9, 1}})},
		{"dead band: some wait, neither grow nor shrink", 4, 3, repeat(10, tick{0.01, 0.5, 3})},
		{"a tick in the dead band restarts the calm count", 4, 3, ticks(repeat(3, tick{0, 0.5, 3}), []tick{{0.01, 0.5, 3}},
			repeat(3, tick{0, 0.5, 3}), []tick{{0, 0.5, 2}})},
		{"the tick after a change settles", 4, 1, []tick{{0.10, 0.95, 2}, {0.10, 1.9, 2}, {0.10, 1.9, 3}}},
		{"a shrink undone doubles the calm ticks the next needs", 4, 3, ticks(
			repeat(3, tick{0, 0.5, 3}), []tick{{0, 0.5, 2}}, // shrink after 4
			[]tick{{0.10, 1.9, 2}},                            // settling
			[]tick{{0.10, 1.9, 3}},                            // clients wait: grow back
			[]tick{{0, 0.5, 3}},                               // settling
			repeat(7, tick{0, 0.5, 3}), []tick{{0, 0.5, 2}})}, // now 8 calm ticks
		{"after a long quiet the calm needed halves again", 4, 3, ticks(
			repeat(3, tick{0, 0.5, 3}), []tick{{0, 0.5, 2}}, []tick{{0.1, 1.9, 2}}, []tick{{0.1, 1.9, 3}},
			repeat(40, tick{0.01, 0.5, 3}), // 40 ticks without a change, in the dead band
			repeat(3, tick{0, 0.5, 3}), []tick{{0, 0.5, 2}})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tu := newTuner(defaultTuneConfig(tc.max))
			active := tc.start
			for i, k := range tc.ticks {
				got := tu.decide(tuneInput{Wait: k.wait, Busy: k.busy, Active: active})
				if got != k.want {
					t.Fatalf("tick %d (wait %.3f, busy %.2f, active %d): %d workers, want %d", i, k.wait, k.busy, active, got, k.want)
				}
				if got < 1 || got > tc.max {
					t.Fatalf("tick %d: %d workers, outside 1..%d", i, got, tc.max)
				}
				active = got
			}
		})
	}
}

// TestTunerGrowMustPay: once settled, a grow that leaves the clients
// waiting must have raised the delivered rate by 5%; if not, the machine is
// short of cores, not of workers, and the worker goes back, with growing
// held off for 8 ticks (doubling each time in a row).
func TestTunerGrowMustPay(t *testing.T) {
	type rtick struct {
		wait, busy, rate float64
		want             int
	}
	waiting := func(n int, rate float64, want int) []rtick {
		out := make([]rtick, n)
		for i := range out {
			out[i] = rtick{0.1, 0.95 * float64(want), rate, want}
		}
		return out
	}
	join := func(parts ...[]rtick) []rtick {
		var out []rtick
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		ticks []rtick
	}{
		{"a grow that raised the rate stays, and growth goes on", join(
			waiting(1, 1000, 2), waiting(1, 1000, 2), waiting(1, 1100, 3))},
		{"a grow that stopped the waiting stays at the same rate", join(
			waiting(1, 1000, 2), waiting(1, 1000, 2), []rtick{{0, 1.5, 1000, 2}}, []rtick{{0, 1.5, 1000, 2}})},
		{"a grow that did not pay is undone and held off", join(
			waiting(1, 1000, 2), waiting(1, 1000, 2), // grow, settle
			[]rtick{{0.1, 1.9, 1010, 1}},                      // +1%: undone
			waiting(1, 1000, 1),                               // settle
			waiting(7, 1000, 1),                               // held off
			waiting(1, 1000, 2),                               // tries again
			waiting(1, 1000, 2), []rtick{{0.1, 1.9, 1000, 1}}, // settle; undone again
			waiting(1, 1000, 1), waiting(15, 1000, 1), waiting(1, 1000, 2))}, // held off twice as long
	} {
		t.Run(tc.name, func(t *testing.T) {
			tu := newTuner(defaultTuneConfig(4))
			active := 1
			for i, k := range tc.ticks {
				got := tu.decide(tuneInput{Wait: k.wait, Busy: k.busy, Rate: k.rate, Active: active})
				if got != k.want {
					t.Fatalf("tick %d (wait %.2f, busy %.2f, rate %.0f, active %d): %d workers, want %d", i, k.wait, k.busy, k.rate, active, got, k.want)
				}
				active = got
			}
		})
	}
}

// TestTunerNoFlapping: a bursty load on the edge, where two workers are
// half idle but one leaves clients waiting, changes the count less and
// less often: each shrink that is undone doubles the calm ticks the next
// one needs, up to MaxCalm.
func TestTunerNoFlapping(t *testing.T) {
	tu := newTuner(defaultTuneConfig(4))
	active, changes := 2, []int{}
	for i := range 400 {
		in := tuneInput{Active: active, Busy: 0.5}
		if active == 1 {
			in.Wait, in.Busy = 0.05, 1 // one worker is saturated and clients wait
		}
		if n := tu.decide(in); n != active {
			changes = append(changes, i)
			active = n
		}
	}
	// Calm runs grow 4, 8, 16, 32, 32...: 400 ticks hold about two dozen
	// changes, not the 114 of a fixed calm of 4.
	t.Logf("%d changes at ticks %v", len(changes), changes)
	if len(changes) > 30 {
		t.Fatalf("%d changes in 400 ticks: %v", len(changes), changes)
	}
	gaps := fmt.Sprint(changes)
	if last := changes[len(changes)-1] - changes[len(changes)-3]; last < 32 {
		t.Errorf("the last shrink-grow cycle took %d ticks, want at least MaxCalm (32): changes at %s", last, gaps)
	}
}

// TestConfigWorkers: --workers takes a count or auto; --workers-max only
// goes with auto; the pool has as many goroutines as either allows.
func TestConfigWorkers(t *testing.T) {
	for _, tc := range []struct {
		workers   string
		max       int
		pool      int // 0: GOMAXPROCS
		auto      bool
		errSubstr string
	}{
		{"3", 0, 3, false, ""},
		{"auto", 0, 0, true, ""},
		{"auto", 6, 6, true, ""},
		{"", 0, 0, false, ""},
		{"2", 4, 0, false, "--workers-max 4 needs --workers auto"},
		{"auto", 2000, 0, true, "--workers-max 2000: want 1..1024"},
		{"-1", 0, 0, false, "--workers -1: want 1..1024 or auto"},
		{"many", 0, 0, false, `--workers "many": want a number or auto`},
	} {
		t.Run(tc.workers+"/"+fmt.Sprint(tc.max), func(t *testing.T) {
			c := Config{MaxWorkers: tc.max}
			var err error
			if tc.workers != "" {
				c.Workers, c.AutoWorkers, err = ParseWorkers(tc.workers)
			}
			if err == nil {
				c.EnsureDefaults()
				err = c.Validate()
			}
			if tc.errSubstr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errSubstr) {
					t.Fatalf("error %v, want one saying %q", err, tc.errSubstr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := tc.pool
			if want == 0 {
				want = runtime.GOMAXPROCS(0)
			}
			if c.AutoWorkers != tc.auto || c.PoolWorkers() != want {
				t.Fatalf("auto %v, %d workers; want auto %v, %d", c.AutoWorkers, c.PoolWorkers(), tc.auto, want)
			}
		})
	}
}
