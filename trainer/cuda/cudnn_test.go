package cuda

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/loaderd/loaderd/trainer/nn"
	"github.com/loaderd/loaderd/trainer/tensor"
)

// convCase is one conv layer: cin→cout channels, k×k kernel, stride,
// padding, on hw×hw inputs.
type convCase struct{ cin, cout, k, stride, pad, hw int }

func (c convCase) String() string {
	return fmt.Sprintf("%d→%d k%d s%d p%d %d×%d", c.cin, c.cout, c.k, c.stride, c.pad, c.hw, c.hw)
}

// smallConvs cover the geometries (odd sizes, strides, 1×1, 5×5,
// stride larger than padding) at sizes an emulator runs quickly.
var smallConvs = []convCase{
	{3, 4, 3, 1, 1, 6}, {4, 6, 3, 2, 1, 7}, {4, 8, 1, 2, 0, 6}, {5, 3, 5, 1, 2, 5}, {2, 3, 3, 3, 0, 8},
}

// resnet18Convs are the distinct conv layers of ResNet-18 for 32×32
// inputs (the stem, each stage's 3×3s and its 1×1 stride-2 shortcut).
var resnet18Convs = []convCase{
	{3, 64, 3, 1, 1, 32}, {64, 64, 3, 1, 1, 32},
	{64, 128, 3, 2, 1, 32}, {128, 128, 3, 1, 1, 16}, {64, 128, 1, 2, 0, 32},
	{128, 256, 3, 2, 1, 16}, {256, 256, 3, 1, 1, 8}, {128, 256, 1, 2, 0, 16},
	{256, 512, 3, 2, 1, 8}, {512, 512, 3, 1, 1, 4}, {256, 512, 1, 2, 0, 8},
}

func newCPU(t testing.TB) tensor.Device {
	cpu, err := tensor.NewCPU("cpu", 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cpu.Close() })
	return cpu
}

// runConv runs one nn.Conv2d on dev, forward and backward over a batch of
// n, on inputs drawn from seed, and returns y, dx and dw. The weights
// come from the model's seed, the same on every device.
func runConv(t *testing.T, dev tensor.Device, c convCase, n int, seed uint64) [3][]float32 {
	t.Helper()
	conv := nn.NewConv2d(c.cin, c.cout, c.k, c.stride, c.pad, false)
	m, err := nn.NewModel(dev, conv, nn.Shape{C: c.cin, H: c.hw, W: c.hw}, 3)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 9))
	draw := func(k int) []float32 {
		v := make([]float32, k)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	x, err := m.Input(n)
	if err != nil {
		t.Fatal(err)
	}
	if err := dev.CopyIn(x.Buf, draw(x.Len())); err != nil {
		t.Fatal(err)
	}
	y, err := m.Forward(x)
	if err != nil {
		t.Fatalf("%v forward on %s: %v", c, dev.Name(), err)
	}
	dyb, err := dev.Alloc(tensor.F32, y.Len())
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Free(dyb)
	if err := dev.CopyIn(dyb, draw(y.Len())); err != nil {
		t.Fatal(err)
	}
	dx, err := conv.Backward(m.Ctx(), nn.Tensor{Buf: dyb, N: n, Shape: m.Out()}, true)
	if err != nil {
		t.Fatalf("%v backward on %s: %v", c, dev.Name(), err)
	}
	var out [3][]float32
	for i, b := range []tensor.Buffer{y.Buf, dx.Buf, m.Grads()} {
		out[i] = make([]float32, b.Len())
		if err := dev.CopyOut(out[i], b); err != nil {
			t.Fatalf("%v on %s: %v", c, dev.Name(), err)
		}
	}
	return out
}

// convLayersMatch runs every case on want and on got (batch n, two draws
// of inputs each) and fails where y, dx or dw differ by more than tol
// relative (‖got − want‖ / ‖want‖); it logs every layer's errors.
func convLayersMatch(t *testing.T, want, got tensor.Device, cases []convCase, n int, tol float64) {
	t.Helper()
	for _, c := range cases {
		var worst [3]float64
		for seed := uint64(1); seed <= 2; seed++ {
			w, g := runConv(t, want, c, n, seed), runConv(t, got, c, n, seed)
			for i := range w {
				worst[i] = max(worst[i], relDiff(g[i], w[i]))
			}
		}
		t.Logf("%-22v y %.2e  dx %.2e  dw %.2e", c, worst[0], worst[1], worst[2])
		for i, name := range []string{"y", "dx", "dw"} {
			if !(worst[i] <= tol) {
				t.Errorf("%v on %s: %s differs from %s's by %.3g relative (want <= %g)", c, got.Name(), name, want.Name(), worst[i], tol)
			}
		}
	}
}

// On the GPU: every ResNet-18 conv layer on cuDNN computes what the own
// kernels (im2col + cuBLAS) compute, f32 within 1e-4; and with TF32 on
// both, within 1e-2 (TF32 keeps 10 mantissa bits).
func TestCUDNNMatchesOwnKernels(t *testing.T) {
	for _, tf32 := range []bool{false, true} {
		t.Run(fmt.Sprintf("tf32=%v", tf32), func(t *testing.T) {
			own := openGPU(t, Config{NoCUDNN: true, TF32: tf32})
			dnn := openGPU(t, Config{TF32: tf32})
			if !dnn.HasCUDNN() {
				t.Fatalf("no cuDNN: %s", dnn.CUDNN())
			}
			t.Logf("%s", dnn.CUDNN())
			tol := 1e-4
			if tf32 {
				tol = 1e-2
			}
			convLayersMatch(t, own, dnn, resnet18Convs, 16, tol)
		})
	}
}
