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
	var addrs []string
	for core := range 2 {
		d := clienttest.Start(b, append(tf.DaemonArgs(), "--dataset", "large=tar:"+data+"?size=any", "--workers", "1", "--auth-tokens", tokens)...)
		pin(b, d.Pid(), core)
		addrs = append(addrs, d.TCPAddr(b))
	}
	creds := client.Credentials{CAFile: tf.CA, CertFile: tf.ClientCert, KeyFile: tf.ClientKey, Token: "bench-token-0123456789"}
	for _, c := range []struct {
		hosts  int
		values bool
	}{{1, false}, {2, false}, {1, true}, {2, true}} {
		hosts, where := c.hosts, map[bool]string{false: "device", true: "cpu"}[c.values]
		b.Run(fmt.Sprintf("hosts=%d/src=large/out=u8/tls/values=%s", hosts, where), func(b *testing.B) {
			target := strings.Join(addrs[:hosts], ",")
			opts, err := creds.DialOptions(target)
			if err != nil {
				b.Fatal(err)
			}
			cl, err := client.Dial(target, opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			rate, cpu := benchPool(b, cl, c.values)
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

// benchPool reads b.N batches of 32, with values applying the value
// tables into an f32 buffer, and returns the rate and this process's CPU
// per image.
func benchPool(b *testing.B, cl *client.Client, values bool) (rate, cpuMicros float64) {
	const batch = 32
	ctx := context.Background()
	s, err := cl.Open(ctx, client.StreamConfig{Dataset: "large", BatchSize: batch, Seed: 1, ValuesOnClient: true,
		Augment: "random_resized_crop=224,flip=0.5,normalize=imagenet,out=f32:chw"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var dst []byte
	step := func() {
		bt, err := s.Next(ctx)
		if err == io.EOF {
			b.Fatal("stream ended")
		}
		if err != nil {
			b.Fatal(err)
		}
		if values {
			if dst, err = bt.Values(dst); err != nil {
				b.Fatal(err)
			}
		}
		bt.Release()
	}
	for range 4 { // the daemons' first batches, before the clock
		step()
	}
	b.SetBytes(int64(batch * 224 * 224 * 3))
	cpu0, t0 := clienttest.CPUTime(), time.Now()
	b.ResetTimer()
	for b.Loop() {
		step()
	}
	el, cpu := time.Since(t0), clienttest.CPUTime()-cpu0
	images := float64(b.N * batch)
	return images / el.Seconds(), float64(cpu.Microseconds()) / images
}
