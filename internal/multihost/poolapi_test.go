//go:build linux && !race

package multihost

import (
	"strconv"
	"strings"
	"time"

	"github.com/loaderd/loaderd/client"
)

// This file is the only one that knows the pool client's API.

// poolTarget is the Dial target of a pool of addrs.
func poolTarget(addrs ...string) string { return strings.Join(addrs, ",") }

// withPool sets the pool's knobs on cfg: failover is how long a daemon
// may stay silent with batches outstanding, resolve how often a name is
// looked up again, and emit receives its events: kind "up", "down",
// "refused" or "alldown" (addr then lists every daemon, comma-separated).
func withPool(cfg *client.StreamConfig, failover, resolve time.Duration, emit func(kind, addr, detail string)) {
	cfg.Pool = client.PoolConfig{FailoverAfter: failover, Resolve: resolve, OnEvent: func(e client.PoolEvent) {
		kind, addr := e.Kind.String(), e.Addr
		if e.Kind == client.AllDown {
			kind, addr = "alldown", strings.Join(e.Addrs, ",")
		}
		detail := ""
		if e.Err != nil {
			detail = e.Err.Error()
		}
		if e.Kind == client.DaemonDown {
			detail = strings.TrimSpace(strings.Join([]string{"moved", strconv.Itoa(e.Moved), detail}, " "))
		}
		emit(kind, addr, detail)
	}}
}

// memberStat is what the pool says of one daemon.
type memberStat struct {
	Addr        string
	Up          bool
	Made        int64 // batches it made that the stream used
	Connects    int
	Outstanding int           // batches wanted of it, not yet received
	BatchTime   time.Duration // its recent time per batch; 0 until measured
}

// members reports s's daemons in the pool's order; none for a stream on
// one daemon.
func members(s *client.Stream) []memberStat {
	var ms []memberStat
	for _, m := range s.Pool() {
		ms = append(ms, memberStat{Addr: m.Addr, Up: m.Up, Made: m.Made, Connects: m.Connects,
			Outstanding: m.Outstanding, BatchTime: m.BatchTime})
	}
	return ms
}

// nextAsked is the daemon of view that a quiet pool asks first: the
// fastest (the stream wants "more of the faster ones"), an unmeasured one
// before any, the first of equals.
func nextAsked(view []memberStat) string {
	best := -1
	for i, m := range view {
		if m.Up && (best < 0 || m.BatchTime < view[best].BatchTime) {
			best = i
		}
	}
	if best < 0 {
		return ""
	}
	return view[best].Addr
}
