package benchmarks

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/loaderd/loaderd/client"
	"github.com/loaderd/loaderd/internal/server"
	"github.com/loaderd/loaderd/loader"
)

// The trainer of BenchmarkAutotune: each step takes the next batch, burns
// trainerCPU of CPU time on its own thread (the forward and backward pass
// a CPU-side trainer, or a GPU trainer's launch thread, spends), and then
// waits out the rest of the step's pace (the GPU). Phase 1 is fast: the
// loading needs about two workers' worth of the 2 cores. Phase 2 is
// slower: one worker keeps up, and the other core belongs to the trainer.
const (
	trainerCPU = 2 * time.Millisecond
	fastPace   = 4 * time.Millisecond  // 64,000 images/s of batch 256: over one worker's JPEG decode (~50k/s)
	slowPace   = 16 * time.Millisecond // 16,000 images/s: one worker has room to spare
)

// autotunePhase is how long each phase runs: LOADERD_AUTOTUNE_PHASE, or 4 s.
func autotunePhase() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("LOADERD_AUTOTUNE_PHASE")); err == nil && d > 0 {
		return d
	}
	return 4 * time.Second
}

// burnCPU spins until the calling thread has used d of CPU time: on a
// contended machine it takes longer, as a trainer's step does.
func burnCPU(d time.Duration) {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	end := ts.Nano() + d.Nanoseconds()
	x := uint64(1)
	for {
		for range 2000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
		unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
		if ts.Nano() >= end {
			break
		}
	}
	sink = x
}

var sink uint64

// phaseResult is what the trainer saw in one phase.
type phaseResult struct {
	steps             int
	elapsed, wait     time.Duration
	settled           time.Duration // from the phase's start to the active count's last change in it
	waitAfter, wallAt time.Duration // wait and wall time after settling
	stepsAfter        int           // steps after settling
	workerTime        time.Duration // integral of the active count
}

// benchAutotune runs the paced trainer against an in-process daemon over
// shared memory on a Unix socket, the JPEG tar decoded by `workers`
// workers, or by --workers auto (workers = 0) with at most 4.
func benchAutotune(b *testing.B, workers int) {
	needJPEGTar(b)
	src, err := loader.Open("tar:" + cifarJPEGTar)
	if err != nil {
		b.Fatal(err)
	}
	opts := server.Options{Workers: workers, Logger: slog.New(slog.DiscardHandler)}
	if workers == 0 {
		opts.Workers, opts.AutoWorkers = 4, true
	}
	srv, err := server.New(opts, &server.Dataset{Name: "cifar", Spec: "tar", Source: src})
	if err != nil {
		b.Fatal(err)
	}
	lis, err := net.Listen("unix", filepath.Join(b.TempDir(), "loaderd.sock"))
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(lis)
	defer srv.Shutdown(context.Background())
	cl, err := client.Dial("unix://" + lis.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	s, err := cl.Open(ctx, client.StreamConfig{Dataset: "cifar", BatchSize: batchSize, Seed: 1, SharedMemory: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()

	// The active count, sampled every 10 ms while the trainer runs.
	type sample struct {
		at     time.Time
		active int
	}
	var mu sync.Mutex
	var samples []sample
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			mu.Lock()
			samples = append(samples, sample{time.Now(), srv.ActiveWorkers()})
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	})

	runtime.LockOSThread() // the trainer's thread: burnCPU counts its CPU time
	defer runtime.UnlockOSThread()
	phase := autotunePhase()
	type stepRec struct {
		at   time.Time
		wait time.Duration
	}
	var results [2]phaseResult
	var steps [2][]stepRec
	var starts [2]time.Time
	b.ResetTimer()
	for p, pace := range []time.Duration{fastPace, slowPace} {
		starts[p] = time.Now()
		for time.Since(starts[p]) < phase {
			t0 := time.Now()
			bt, err := s.Next(ctx)
			if err != nil {
				b.Fatal(err)
			}
			w := time.Since(t0)
			burnCPU(trainerCPU)
			bt.Release()
			steps[p] = append(steps[p], stepRec{t0, w})
			if rest := pace - time.Since(t0); rest > 0 {
				time.Sleep(rest)
			}
		}
		results[p].elapsed = time.Since(starts[p])
	}
	b.StopTimer()
	close(stop)
	wg.Wait()

	var total phaseResult
	for p := range results {
		r := &results[p]
		end := starts[p].Add(r.elapsed)
		last := starts[p]
		prev := -1
		for i, sm := range samples {
			if sm.at.Before(starts[p]) || sm.at.After(end) {
				continue
			}
			if prev >= 0 && sm.active != prev {
				last = sm.at
			}
			prev = sm.active
			if i+1 < len(samples) {
				r.workerTime += time.Duration(sm.active) * samples[i+1].at.Sub(sm.at)
			}
		}
		r.settled = last.Sub(starts[p])
		r.steps = len(steps[p])
		for _, st := range steps[p] {
			r.wait += st.wait
			if !st.at.Before(last) {
				r.waitAfter += st.wait
				r.stepsAfter++
			}
		}
		r.wallAt = end.Sub(last)
		total.steps += r.steps
		total.elapsed += r.elapsed
		total.wait += r.wait
		total.workerTime += r.workerTime
	}
	b.ReportMetric(float64(total.steps*batchSize)/total.elapsed.Seconds(), "images/s")
	b.ReportMetric(float64(total.wait)/float64(total.elapsed)*100, "%wait")
	for p, r := range results {
		name := fmt.Sprintf("phase%d-", p+1)
		b.ReportMetric(float64(r.steps*batchSize)/r.elapsed.Seconds(), name+"images/s")
		b.ReportMetric(float64(r.workerTime)/float64(r.elapsed), name+"workers")
		if workers == 0 {
			b.ReportMetric(r.settled.Seconds(), name+"settle-s")
			b.ReportMetric(float64(r.waitAfter)/float64(r.wallAt)*100, name+"%wait-settled")
			b.ReportMetric(float64(r.stepsAfter*batchSize)/r.wallAt.Seconds(), name+"images/s-settled")
		}
	}
}

// BenchmarkAutotune compares --workers auto with every fixed count a
// 2-core machine offers (and two more), on the same paced trainer in one
// run. Run it with -benchtime 1x (each case is two phases of 4 s, or
// LOADERD_AUTOTUNE_PHASE); interleave repetitions with -count.
func BenchmarkAutotune(b *testing.B) {
	for _, w := range []int{1, 2, 3, 4, 0} {
		name := fmt.Sprint("src=cifarjpeg/trainer=paced/workers=", w)
		if w == 0 {
			name = "src=cifarjpeg/trainer=paced/workers=auto"
		}
		b.Run(name, func(b *testing.B) { benchAutotune(b, w) })
	}
}
