package cuda

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/loaderd/loaderd/trainer/nn"
	"github.com/loaderd/loaderd/trainer/optim"
	"github.com/loaderd/loaderd/trainer/parallel"
	"github.com/loaderd/loaderd/trainer/tensor"
)

// What trainer.Train runs on a device: a CNN stepped by
// parallel.DataParallel. These tests hold CUDA devices to the CPU engine
// over whole training steps (forward, loss, backward, all-reduce, SGD),
// which the per-kernel checks cannot: a wrong buffer handed between
// layers, or a copy read before it is queued, shows only here.

var trainIn = nn.Shape{C: 3, H: 8, W: 8}

func trainBuild() (nn.Module, error) {
	return nn.NewCNN(nn.CNNConfig{Widths: []int{4, 8}, Blocks: []int{1, 1}, Classes: 10})
}

// SyncBN: with per-replica BatchNorm statistics, K = 2 replicas of half
// the batch compute another function than one device on the whole batch.
func trainConfig() parallel.Config {
	return parallel.Config{In: trainIn, Seed: 7, Smoothing: 0.1, SyncBN: true,
		SGD: optim.SGDConfig{Momentum: 0.9, Nesterov: true, WeightDecay: 5e-4}}
}

// trainSteps runs steps DataParallel steps of batch n on devs and returns
// replica 0's weights and the losses; every batch is fresh random data.
func trainSteps(t *testing.T, devs []tensor.Device, steps, n int) ([]float32, []float64) {
	t.Helper()
	dp, err := parallel.NewDataParallel(devs, trainBuild, trainConfig())
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(11, 12))
	x := make([]float32, n*trainIn.Size())
	labels := make([]int32, n)
	var losses []float64
	for s := range steps {
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		for i := range labels {
			labels[i] = int32(r.IntN(10))
		}
		st, err := dp.Step(x, labels, 0.1/float64(s+1))
		if err != nil {
			t.Fatalf("step %d on %s: %v", s, devs[0].Name(), err)
		}
		losses = append(losses, st.Loss)
	}
	m := dp.Model(0)
	w := make([]float32, m.NumParams())
	if err := m.Device().CopyOut(w, m.Weights()); err != nil {
		t.Fatal(err)
	}
	return w, losses
}

// relDiff is ‖a − b‖ / ‖b‖ (NaN never passes).
func relDiff(a, b []float32) float64 {
	var num, den float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		num += d * d
		den += float64(b[i]) * float64(b[i])
	}
	r := math.Sqrt(num / den)
	if math.IsNaN(r) {
		return math.Inf(1)
	}
	return r
}

// trainMatchesCPU trains K = 1 on the CPU, then on the devices open
// returns (K of them), and compares weights and losses.
func trainMatchesCPU(t *testing.T, open func(k int) []tensor.Device, k int, tol float64) {
	const steps, n = 4, 16
	cpu, err := tensor.NewCPU("cpu:0", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer cpu.Close()
	want, wantLoss := trainSteps(t, []tensor.Device{cpu}, steps, n)
	got, gotLoss := trainSteps(t, open(k), steps, n)
	if d := relDiff(got, want); !(d <= tol) {
		t.Errorf("K=%d: weights after %d steps differ from the CPU's by %.3g relative (want <= %g)", k, steps, d, tol)
	}
	for s := range wantLoss {
		if d := math.Abs(gotLoss[s]-wantLoss[s]) / math.Abs(wantLoss[s]); !(d <= tol) {
			t.Errorf("K=%d step %d: loss %v, CPU %v", k, s, gotLoss[s], wantLoss[s])
		}
	}
}

// On the GPU: K = 1 and K = 2 logical devices (two streams on GPU 0, as the
// one-GPU machines can prove DataParallel) train as the CPU does.
func TestTrainStepsMatchCPU(t *testing.T) {
	openGPU(t, Config{}) // skips without a GPU
	open := func(k int) []tensor.Device {
		var devs []tensor.Device
		for range k {
			devs = append(devs, openGPU(t, Config{}))
		}
		return devs
	}
	for _, k := range []int{1, 2} {
		trainMatchesCPU(t, open, k, 1e-4)
	}
}

// The same on the host emulator, so the path is checked without a GPU:
// K = 1 only, since the emulator's launch state is process-global and two
// devices stepping concurrently would share it.
func TestEmulatedTrainStepsMatchCPU(t *testing.T) {
	open := func(int) []tensor.Device { return []tensor.Device{openEmu(t, true)} }
	trainMatchesCPU(t, open, 1, 1e-4)
}

// Convolutions lowered a few images at a time on the device, as a batch of
// 512 CIFAR images is with the real 256 MiB: of the batch of 16, the stem
// and the first stage take 3 at a time (the last chunk 1), the second
// stage's 3×3 convs 10 or 6, its 1×1 shortcut all 16. Each chunk's im2col,
// GEMM and transpose address views inside the device's buffers, which one
// whole-batch chunk never does.
func TestEmulatedChunkedTrainStepsMatchCPU(t *testing.T) {
	open := func(int) []tensor.Device {
		d := openEmu(t, true)
		d.scratch = 3 * (4*9 + 4) * 8 * 8 // three images of the first stage's 4→4 conv
		return []tensor.Device{d}
	}
	trainMatchesCPU(t, open, 1, 1e-4)
}
