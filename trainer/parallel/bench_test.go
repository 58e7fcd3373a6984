package parallel

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/loaderd/loaderd/client/clienttest"
	"github.com/loaderd/loaderd/trainer/nn"
	"github.com/loaderd/loaderd/trainer/optim"
)

// benchDP measures full DataParallel training steps (scatter, forward,
// backward, reduce, SGD, broadcast) of the default CNN on CIFAR-shaped data.
func benchDP(b *testing.B, k, workers, batch int, syncBN bool) {
	cfg := Config{In: nn.CIFAR, Seed: 1, SyncBN: syncBN,
		SGD: optim.SGDConfig{Momentum: 0.9, Nesterov: true, WeightDecay: 5e-4}}
	build := func() (nn.Module, error) { return nn.NewCNN(nn.DefaultCNN) }
	dp, err := NewDataParallel(cpus(b, k, workers), build, cfg)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 1))
	x := make([]float32, batch*nn.CIFAR.Size())
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	labels := make([]int32, batch)
	for i := range labels {
		labels[i] = int32(r.IntN(10))
	}
	if _, err := dp.Step(x, labels, 0.01); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(4 * len(x)))
	b.ResetTimer()
	cpu0 := clienttest.CPUTime()
	for range b.N {
		if _, err := dp.Step(x, labels, 0.01); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "images/s")
	b.ReportMetric((clienttest.CPUTime()-cpu0).Seconds()*1e6/float64(b.N*batch), "cpu-µs/image")
}

func BenchmarkDataParallel(b *testing.B) {
	for _, c := range []struct {
		k, workers int
		syncBN     bool
	}{{1, 2, false}, {2, 1, false}, {2, 1, true}} {
		name := fmt.Sprintf("model=cnn/devices=%d/workers=%d/syncbn=%v/batch=128", c.k, c.workers, c.syncBN)
		b.Run(name, func(b *testing.B) { benchDP(b, c.k, c.workers, 128, c.syncBN) })
	}
}
