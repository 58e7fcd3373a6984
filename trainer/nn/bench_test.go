package nn

import (
	"math/rand/v2"
	"testing"

	"github.com/loaderd/loaderd/client/clienttest"
)

// benchTrainStep measures forward + loss + backward of a model on one CPU
// device with the given goroutine budget (no optimizer step).
func benchTrainStep(b *testing.B, build func() Module, workers, batch int) {
	dev := newCPU(b, workers)
	m, err := NewModel(dev, build(), CIFAR, 1)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, batch*CIFAR.Size())
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	labels := make([]int32, batch)
	for i := range labels {
		labels[i] = int32(r.IntN(10))
	}
	xt, _ := m.Input(batch)
	lab, _ := m.Labels(batch)
	loss := NewSoftmaxCrossEntropy(0)
	step := func() {
		dev.CopyIn(xt.Buf, x)
		dev.CopyInInt32(lab, labels)
		y, err := m.Forward(xt)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := loss.Forward(m.Ctx(), y, lab); err != nil {
			b.Fatal(err)
		}
		dl, _ := loss.Backward(m.Ctx(), 1/float32(batch))
		if err := m.Backward(dl); err != nil {
			b.Fatal(err)
		}
	}
	step() // allocate activations outside the timed loop
	b.ReportAllocs()
	b.SetBytes(int64(4 * len(x)))
	b.ResetTimer()
	cpu0 := clienttest.CPUTime()
	for range b.N {
		step()
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "images/s")
	// CPU time per image is steadier than wall time on a shared machine.
	b.ReportMetric((clienttest.CPUTime()-cpu0).Seconds()*1e6/float64(b.N*batch), "cpu-µs/image")
}

func cnn() Module { m, _ := NewCNN(DefaultCNN); return m }
func mlp() Module { return NewMLP(CIFAR, []int{512, 256}, 10) }

func BenchmarkTrainStep(b *testing.B) {
	b.Run("model=cnn/workers=2/batch=128", func(b *testing.B) { benchTrainStep(b, cnn, 2, 128) })
	b.Run("model=cnn/workers=1/batch=128", func(b *testing.B) { benchTrainStep(b, cnn, 1, 128) })
	b.Run("model=mlp/workers=2/batch=128", func(b *testing.B) { benchTrainStep(b, mlp, 2, 128) })
}
