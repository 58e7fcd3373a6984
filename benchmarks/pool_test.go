//go:build linux

package benchmarks

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/loaderd/loaderd/client"
	"github.com/loaderd/loaderd/client/clienttest"
)

// poolRate is hosts=1's rate by values=, for hosts=2's speed-up in the
// same run.
var poolRate = map[bool]float64{}

// BenchmarkPool measures a pool across hosts as the issue sizes it: the
// large-image set under torchvision's ImageNet training transform
// (random_resized_crop=224), sent as uint8 over TLS with a client
// certificate and a token. values=cpu applies the values (normalize, f32)
// into a trainer's buffer with Batch.Values; values=device leaves them to
// the trainer's GPU (the Python client's normalize_on="cuda"). Each daemon is a process of its own
// pinned to one core (GOMAXPROCS=1, --workers 1): a CPU host of one core.
// hosts=2 reports its speed-up over hosts=1 when both run; client-µs/image
// is this process's CPU (TLS, decoding the messages, the value tables)
// per image received: what bounds how many pool hosts a trainer host can
// absorb.
func BenchmarkPool(b *testing.B) {
	if runtime.NumCPU() < 2 {
		b.Skip("needs two cores: one per daemon host")
	}
	data := largeImagesTar(b)
	dir := b.TempDir()
	tf := clienttest.WriteTLS(b, dir)
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("bench-token-0123456789 datasets=large\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	b.Setenv("GOMAXPROCS", "1") // the daemons'; this process's runtime has started
	// Daemons on cores 0 and 1 for the runs one after the other, and a
	// third on core 0 for the one host of the runs in turns (whose two
	// hosts are the first two), so that neither side's daemons hold the
	// other's leftover batches.
	var addrs []string
	for _, core := range []int{0, 1, 0} {
		d := clienttest.Start(b, append(tf.DaemonArgs(), "--dataset", "large=tar:"+data+"?size=any", "--workers", "1", "--auth-tokens", tokens)...)
		pin(b, d.Pid(), core)
		addrs = append(addrs, d.TCPAddr(b))
	}
	creds := client.Credentials{CAFile: tf.CA, CertFile: tf.ClientCert, KeyFile: tf.ClientKey, Token: "bench-token-0123456789"}
	dial := func(b *testing.B, addrs ...string) *client.Client {
		target := strings.Join(addrs, ",")
		opts, err := creds.DialOptions(target)
		if err != nil {
			b.Fatal(err)
		}
		cl, err := client.Dial(target, opts...)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cl.Close() })
		return cl
	}
	for _, c := range []struct {
		hosts  int
		values bool
	}{{1, false}, {2, false}, {1, true}, {2, true}} {
		hosts, where := c.hosts, map[bool]string{false: "device", true: "cpu"}[c.values]
		b.Run(fmt.Sprintf("hosts=%d/src=large/out=u8/tls/values=%s", hosts, where), func(b *testing.B) {
			rate, cpu := benchPool(b, dial(b, addrs[:hosts]...), c.values)
			b.ReportMetric(rate, "images/s")
			b.ReportMetric(cpu, "client-µs/image")
			switch {
			case hosts == 1:
				poolRate[c.values] = rate
			case poolRate[c.values] > 0:
				b.ReportMetric(rate/poolRate[c.values], "x-one-host")
			}
		})
	}
	// The figure to quote: one host and two in turns, as benchShmShare
	// does, since this VM's speed drifts by a third between the runs above.
	b.Run("turns=hosts1,hosts2/src=large/out=u8/tls/values=device", func(b *testing.B) {
		benchPoolTurns(b, dial(b, addrs[2]), dial(b, addrs[:2]...))
	})
}

// benchPoolTurns reads one host's stream (one) and two hosts' (two) in
// turns of poolTurn batches each, every loop a turn of each, and reports
// both rates, their ratio and this process's CPU per image of each. A
// turn first waits, untimed, while the other side's daemons refill their
// window (the stream just left; 8 batches of 32 large images take a
// single-core daemon about 0.6 s), then reads its own window, made
// while it waited, and only then times poolTurn batches: the daemons of
// one side work only during that side's turn.
func benchPoolTurns(b *testing.B, one, two *client.Client) {
	const poolTurn, drain, settle = 24, 16, 1500 * time.Millisecond
	s1, s2 := openPoolStream(b, one), openPoolStream(b, two)
	defer s1.Close()
	defer s2.Close()
	next1, next2 := func() { poolStep(b, s1, nil) }, func() { poolStep(b, s2, nil) }
	turn := func(next func()) (time.Duration, time.Duration) {
		time.Sleep(settle)
		for range drain {
			next()
		}
		cpu0, t0 := clienttest.CPUTime(), time.Now()
		for range poolTurn {
			next()
		}
		return time.Since(t0), clienttest.CPUTime() - cpu0
	}
	turn(next1)
	turn(next2)
	var el, cpu [2]time.Duration
	b.ResetTimer()
	for b.Loop() {
		var pair [2]time.Duration
		for i, next := range []func(){next1, next2} {
			e, c := turn(next)
			pair[i] = e
			el[i] += e
			cpu[i] += c
		}
		// Each pair's own ratio, to see how far the VM drifted.
		b.Logf("turns: one host %v, two hosts %v: %.2fx", pair[0].Round(time.Millisecond), pair[1].Round(time.Millisecond),
			pair[0].Seconds()/pair[1].Seconds())
	}
	images := float64(b.N * poolTurn * poolBatch)
	b.ReportMetric(images/el[0].Seconds(), "one-host-images/s")
	b.ReportMetric(images/el[1].Seconds(), "two-host-images/s")
	b.ReportMetric(el[0].Seconds()/el[1].Seconds(), "x-one-host")
	b.ReportMetric(float64(cpu[0].Microseconds())/images, "one-host-client-µs/image")
	b.ReportMetric(float64(cpu[1].Microseconds())/images, "two-host-client-µs/image")
}

// pin puts every thread of process pid on one core.
func pin(b *testing.B, pid, core int) {
	var set unix.CPUSet
	set.Set(core)
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, t := range tasks {
		var tid int
		fmt.Sscan(t.Name(), &tid)
		if err := unix.SchedSetaffinity(tid, &set); err != nil {
			b.Fatalf("pin daemon %d to core %d: %v", pid, core, err)
		}
	}
}

// poolBatch is the batch size of the pool benchmarks.
const poolBatch = 32

// openPoolStream opens the benchmarks' stream (uint8 with the value table).
func openPoolStream(b *testing.B, cl *client.Client) *client.Stream {
	s, err := cl.Open(context.Background(), client.StreamConfig{Dataset: "large", BatchSize: poolBatch, Seed: 1,
		ValuesOnClient: true, Augment: "random_resized_crop=224,flip=0.5,normalize=imagenet,out=f32:chw"})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// poolStep reads one batch of s and releases it, first applying its
// values into *dst when dst is not nil.
func poolStep(b *testing.B, s *client.Stream, dst *[]byte) {
	bt, err := s.Next(context.Background())
	if err == io.EOF {
		b.Fatal("stream ended")
	}
	if err != nil {
		b.Fatal(err)
	}
	if dst != nil {
		if *dst, err = bt.Values(*dst); err != nil {
			b.Fatal(err)
		}
	}
	bt.Release()
}

// benchPool reads b.N batches, with values applying the value tables into
// an f32 buffer, and returns the rate and this process's CPU per image.
func benchPool(b *testing.B, cl *client.Client, values bool) (rate, cpuMicros float64) {
	s := openPoolStream(b, cl)
	defer s.Close()
	var dst *[]byte // the f32 buffer Values reuses, with values
	if values {
		dst = new([]byte)
	}
	for range 4 { // the daemons' first batches, before the clock
		poolStep(b, s, dst)
	}
	b.SetBytes(int64(poolBatch * 224 * 224 * 3))
	cpu0, t0 := clienttest.CPUTime(), time.Now()
	b.ResetTimer()
	for b.Loop() {
		poolStep(b, s, dst)
	}
	el, cpu := time.Since(t0), clienttest.CPUTime()-cpu0
	images := float64(b.N * poolBatch)
	return images / el.Seconds(), float64(cpu.Microseconds()) / images
}
