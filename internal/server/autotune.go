package server

import (
	"time"
)

// --workers auto: a controller that sets the pool's active workers from
// what the clients report and what the workers do.
//
// Each tick it reads two numbers over the tick: the worst stream's client
// wait share (the wait its client reported on acks, over the tick's wall
// time) and the busy workers (the pool's busy time over the tick's wall
// time). Clients that wait while the workers are saturated are short of
// workers: grow. Clients that do not wait while a worker's worth of time
// goes idle can give a core back to the trainer: shrink. A client that
// waits while workers idle is short of something else (its window, the
// network, its own thread): more workers would only take cores, so it
// changes nothing. The wait is measured by the client from its caller's
// request to having the batch, so a client holding its whole window (the
// trainer is the bottleneck) reports no wait.
//
// Hysteresis, so that a noisy signal does not flap: a dead band between
// the wait that shrinks (target/4) and the wait that grows (target), and
// between the utilisation that grows (saturated) and the one that shrinks
// (the rest would stay under shrinkUtil); a tick of settling after each
// change, whose measurements straddle two settings; several calm ticks
// before a shrink; and when a shrink is undone soon after, twice as many
// calm ticks before the next (back to the base after a long quiet).
//
// A grow must pay: if, once settled, the clients still wait and the images
// delivered per second did not rise by GrowGain, the new worker only took a
// core (the machine is short of CPU, not the pool of workers: another
// process, or the trainer, holds the cores), so it is undone, and growing
// is held off for a while, twice as long each time in a row.

// Defaults of the controller; tests and benchmarks reach them through
// tuneConfig.
const (
	autoTick       = 250 * time.Millisecond
	autoWaitTarget = 0.02 // grow while the worst client waits more than 2% of its time
)

type tuneConfig struct {
	Min, Max   int
	Target     float64 // wait share that grows; a quarter of it counts as calm
	Saturated  float64 // busy share of the active workers that counts as saturated
	ShrinkUtil float64 // shrink only if the remaining workers would be at most this busy (over 1: busy is wall time, preemption included)
	Calm       int     // calm ticks before a shrink
	MaxCalm    int     // bound on the doubled calm requirement
	Quiet      int     // ticks without a change after which the requirement halves
	GrowGain   float64 // a grow that leaves clients waiting must raise the delivered rate this much
	GrowHold   int     // ticks without growing after a grow that did not pay; doubles, up to 2*MaxCalm
}

func defaultTuneConfig(maxWorkers int) tuneConfig {
	return tuneConfig{Min: 1, Max: max(maxWorkers, 1), Target: autoWaitTarget,
		Saturated: 0.75, ShrinkUtil: 1.2, Calm: 4, MaxCalm: 32, Quiet: 40, GrowGain: 0.05, GrowHold: 8}
}

// tuneInput is one tick's measurements.
type tuneInput struct {
	Wait   float64 // worst stream's client wait share over the tick, 0..1
	Busy   float64 // busy workers over the tick (busy time / tick)
	Rate   float64 // images delivered per second over the tick, all streams
	Active int     // active workers during the tick
}

// tuner decides; it holds the hysteresis state and nothing else, so tests
// drive it tick by tick. Not safe for concurrent use.
type tuner struct {
	cfg    tuneConfig
	settle bool // the tick after a change is not measured
	calm   int  // consecutive calm ticks
	need   int  // calm ticks a shrink needs now
	since  int  // ticks since the last change
	shrunk bool // the last change was a shrink

	probe     bool    // the last change was a grow, not yet judged
	before    float64 // the delivered rate before it
	hold      int     // ticks left without growing
	holdTicks int     // the next hold's length
}

func newTuner(cfg tuneConfig) *tuner {
	return &tuner{cfg: cfg, need: cfg.Calm, holdTicks: cfg.GrowHold}
}

// decide returns the active worker count for the next tick.
func (t *tuner) decide(in tuneInput) int {
	c := t.cfg
	n := min(max(in.Active, c.Min), c.Max)
	t.since++
	if t.since%c.Quiet == 0 && t.need > c.Calm {
		t.need = max(t.need/2, c.Calm) // a long quiet: trust shrinking again
	}
	if t.settle {
		t.settle = false
		return n
	}
	if t.hold > 0 {
		t.hold--
	}
	if t.probe {
		t.probe = false
		if in.Wait > c.Target && in.Rate < t.before*(1+c.GrowGain) {
			// The grow did not pay: give the core back, and hold off.
			t.hold, t.holdTicks = t.holdTicks, min(2*t.holdTicks, 2*c.MaxCalm)
			return t.changed(max(n-1, c.Min), false)
		}
		t.holdTicks = c.GrowHold // it paid
	}
	util := in.Busy / float64(n)
	switch {
	case in.Wait > c.Target:
		t.calm = 0
		if util < c.Saturated || n >= c.Max || t.hold > 0 {
			return n // the workers are not the bottleneck, there are no more, or more did not help
		}
		if t.shrunk && t.since <= 2*t.need {
			t.need = min(2*t.need, c.MaxCalm) // the last shrink was a mistake
		}
		step := 1
		if in.Wait > 0.25 {
			step = max(1, n/2) // stalled a quarter of the time: far short, grow faster
		}
		t.probe, t.before = true, in.Rate
		return t.changed(min(n+step, c.Max), false)
	case in.Wait <= c.Target/4:
		t.calm++
		if t.calm < t.need || n <= c.Min || in.Busy > float64(n-1)*c.ShrinkUtil {
			return n
		}
		return t.changed(n-1, true)
	default: // the dead band: neither calm nor short
		t.calm = 0
		return n
	}
}

func (t *tuner) changed(n int, shrink bool) int {
	t.settle, t.calm, t.since, t.shrunk = true, 0, 0, shrink
	return n
}

// autotune runs the controller until the server stops.
func (s *Server) autotune(cfg tuneConfig, tick time.Duration) {
	t := newTuner(cfg)
	type streamTotals struct{ wait, sent int64 }
	prev := map[*streamStat]streamTotals{}
	seen := map[*streamStat]bool{}
	last, lastBusy := time.Now(), s.pool.Busy()
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	for {
		select {
		case <-s.stopping:
			return
		case <-ticker.C:
		}
		now, busy := time.Now(), s.pool.Busy()
		dt := now.Sub(last).Seconds()
		in := tuneInput{Busy: (busy - lastBusy).Seconds() / dt, Active: s.pool.Active()}
		clear(seen)
		s.live.each(func(st *streamStat) {
			w, n := st.waitNs.Load(), st.sent.Load()
			p := prev[st]
			in.Wait = max(in.Wait, float64(w-p.wait)/1e9/dt)
			in.Rate += float64(n-p.sent) / dt
			prev[st], seen[st] = streamTotals{w, n}, true
		})
		for st := range prev {
			if !seen[st] {
				delete(prev, st) // the stream ended
			}
		}
		last, lastBusy = now, busy
		if n := t.decide(in); n != in.Active {
			s.pool.SetActive(n)
			dir := "grow"
			if n < in.Active {
				dir = "shrink"
			}
			s.metrics.tuned.WithLabelValues(dir).Inc()
			s.log.Debug("workers auto", "active", n, "was", in.Active, "client_wait", in.Wait, "busy_workers", in.Busy)
		}
	}
}

// ActiveWorkers returns the number of workers taking work now.
func (s *Server) ActiveWorkers() int { return s.pool.Active() }
