package server

import (
	"bufio"
	"context"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// rss returns this process's resident set in bytes (0 off Linux).
func rss() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// TestRapidResetFlood (issue 29, case 7) measures an HTTP/2 rapid-reset
// flood: four connections open streams and reset each as soon as its Open
// is sent, from 32 goroutines each, against a daemon whose memory limit
// lets them map 1.5 GiB of batch pools (20 MiB a stream). It logs how far
// the process grows and how often a normal client on its own connection
// still opens a stream, and holds what must hold: the normal client's
// Opens all succeed, and every stream logged as opened is logged as ended.
// Opt-in (LOADERD_FLOOD=1): it is a measurement of several seconds.
func TestRapidResetFlood(t *testing.T) {
	if os.Getenv("LOADERD_FLOOD") != "1" {
		t.Skip("a flood of several seconds and 100k streams: LOADERD_FLOOD=1 runs it")
	}
	logs := &countingLog{}
	srv, err := New(Options{Workers: 2, MemoryLimit: 1536 << 20, IdlePools: 1, Logger: slog.New(slog.NewTextHandler(logs, nil))},
		testDataset("good", testSource{n: 1 << 16}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	addr := srv.listenAddrForTest(t)
	dial := func() *grpc.ClientConn {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// 4096 f32 8×8×3 samples a batch: 3 MiB, 4 in flight and their spares.
	open := &pb.Open{Dataset: "good", BatchSize: 4096, MaxInFlight: 4, Augment: "out=f32:chw"}
	normal := pb.NewLoaderClient(dial())
	opens := func(d time.Duration) (n int) {
		for end := time.Now().Add(d); time.Now().Before(end); n++ {
			ctx, cancel := context.WithCancel(context.Background())
			st, err := openRaw(ctx, normal, open)
			if err == nil {
				_, err = st.Recv()
			}
			cancel()
			if err != nil {
				t.Fatalf("a normal client's Open %d: %v", n, err)
			}
		}
		return n
	}
	base := rss()
	quiet := opens(time.Second)

	stop := make(chan struct{})
	var peak, peakPools, peakHeap atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // sample the resident set while the flood runs
		defer wg.Done()
		var ms runtime.MemStats
		for {
			peak.Store(max(peak.Load(), rss()))
			peakPools.Store(max(peakPools.Load(), srv.slots.budget.inUse(memStream)+srv.slots.budget.inUse(memIdle)))
			runtime.ReadMemStats(&ms)
			peakHeap.Store(max(peakHeap.Load(), int64(ms.HeapInuse)))
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	var sent atomic.Int64
	for range 4 {
		api := pb.NewLoaderClient(dial())
		for range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					ctx, cancel := context.WithCancel(context.Background())
					if st, err := api.Stream(ctx); err == nil {
						st.Send(&pb.StreamRequest{Msg: &pb.StreamRequest_Open{Open: open}})
						sent.Add(1)
					}
					cancel() // RST_STREAM
				}
			}()
		}
	}
	flooded := opens(2 * time.Second)
	close(stop)
	wg.Wait()
	grew := peak.Load() - base
	t.Logf("peak pools %d MiB, peak heap %d MiB, streams opened %d", peakPools.Load()>>20, peakHeap.Load()>>20, logs.count("stream opened"))
	t.Logf("%d streams reset by the flood; a normal client opened %.0f/s quiet, %.0f/s during the flood (%.0f%%); resident set grew %d MiB (limit 1536 MiB)",
		sent.Load(), float64(quiet), float64(flooded)/2, 100*float64(flooded)/2/float64(quiet), grew>>20)
	waitFor(t, func() bool { return logs.count("stream opened") == logs.count("stream ended") })
	if logs.count("stream opened") == 0 {
		t.Fatal("no stream opened at all")
	}
}

// countingLog is a log sink that counts lines by content.
type countingLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *countingLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.lines = append(l.lines, string(p))
	l.mu.Unlock()
	return len(p), nil
}

func (l *countingLog) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}
