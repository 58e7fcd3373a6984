package cuda

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/loaderd/loaderd/trainer/nn"
	"github.com/loaderd/loaderd/trainer/optim"
	"github.com/loaderd/loaderd/trainer/parallel"
	"github.com/loaderd/loaderd/trainer/tensor"
)

// benchStep times whole DataParallel training steps (forward, loss,
// backward, SGD) of the CIFAR CNN that scripts/gpu-check.sh trains, on
// one GPU, batch n of fresh random data. With LOADERD_PROFILE=1 it then
// profiles three steps op by op (SetProfile) and logs where a step's time
// goes, the table that says which kernel or GEMM shape to speed up.
func benchStep(b *testing.B, cfg Config, cnn nn.CNNConfig, n int) {
	g := openGPU(b, cfg)
	build := func() (nn.Module, error) { return nn.NewCNN(cnn) }
	dp, err := parallel.NewDataParallel([]tensor.Device{g}, build, parallel.Config{In: nn.CIFAR, Seed: 1,
		Smoothing: 0.1, SGD: optim.SGDConfig{Momentum: 0.9, Nesterov: true, WeightDecay: 5e-4}})
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, n*nn.CIFAR.Size())
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	labels := make([]int32, n)
	for i := range labels {
		labels[i] = int32(r.IntN(10))
	}
	step := func() {
		if _, err := dp.Step(x, labels, 0.01); err != nil {
			b.Fatal(err)
		}
	}
	step() // allocations, cuBLAS heuristics
	b.SetBytes(int64(4 * len(x)))
	b.ResetTimer()
	for b.Loop() {
		step()
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "images/s")
	if os.Getenv("LOADERD_PROFILE") != "1" {
		return
	}
	b.StopTimer()
	const steps = 3
	g.SetProfile(true)
	t0 := time.Now()
	for range steps {
		step()
	}
	wall := time.Since(t0)
	prof := g.Profile()
	g.SetProfile(false)
	b.Log(profileTable(prof, wall, steps))
}

// profileTable formats Profile's ops per step, largest first, with the
// share of the profiled wall time (the rest is host work between ops).
func profileTable(prof []OpTime, wall time.Duration, steps int) string {
	var sb strings.Builder
	var sum time.Duration
	for _, p := range prof {
		sum += p.Total
	}
	per := func(d time.Duration) float64 { return float64(d) / float64(steps) / 1e6 }
	fmt.Fprintf(&sb, "profiled step: %.2f ms wall, %.2f ms in %d kinds of op\n", per(wall), per(sum), len(prof))
	for i, p := range prof {
		if i == 40 {
			fmt.Fprintf(&sb, "  … %d more\n", len(prof)-i)
			break
		}
		fmt.Fprintf(&sb, "  %8.3f ms %5.1f%% %4d×  %s\n", per(p.Total), 100*float64(p.Total)/float64(wall), p.Calls/steps, p.Op)
	}
	return sb.String()
}

func BenchmarkStep(b *testing.B) {
	small := nn.CNNConfig{Widths: []int{64, 128, 256}, Blocks: []int{1, 1, 1}, Classes: 10}
	resnet18 := nn.CNNConfig{Widths: []int{64, 128, 256, 512}, Blocks: []int{2, 2, 2, 2}, Classes: 10}
	for _, c := range []struct {
		name      string
		cnn       nn.CNNConfig
		tf32, own bool
	}{
		{"cnn-64-128-256", small, true, false},
		{"resnet18", resnet18, false, false},
		{"resnet18", resnet18, true, false},
		{"resnet18", resnet18, true, true}, // im2col + cuBLAS: the old code, in the same run
	} {
		conv := "cudnn"
		if c.own {
			conv = "own"
		}
		name := fmt.Sprintf("model=%s/batch=512/tf32=%v/conv=%s", c.name, c.tf32, conv)
		b.Run(name, func(b *testing.B) { benchStep(b, Config{TF32: c.tf32, NoCUDNN: c.own}, c.cnn, 512) })
	}
}
