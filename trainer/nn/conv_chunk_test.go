package nn

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/loaderd/loaderd/trainer/tensor"
)

// sizedDev is a host device that asks for its own scratch size, as a GPU
// does, and counts the launches a conv makes.
type sizedDev struct {
	tensor.Device
	floats         int
	im2cols, gemms int
}

func (d *sizedDev) ScratchFloats() int { return d.floats }

func (d *sizedDev) Im2Col(col, x tensor.Buffer, g tensor.ConvGeom, n int) {
	d.im2cols++
	d.Device.Im2Col(col, x, g, n)
}

func (d *sizedDev) Gemm(ta, tb tensor.Transpose, m, n, k int, alpha float32, a tensor.Buffer, lda int,
	b tensor.Buffer, ldb int, beta float32, c tensor.Buffer, ldc int) {
	d.gemms++
	d.Device.Gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// A tensor.ScratchSizer sets how many images a conv lowers at once: one
// chunk for the whole batch makes one im2col and one GEMM per pass where
// the host's default makes one per image, and both compute the same
// outputs and gradients (up to the GEMMs' summation order).
func TestConvScratchSizer(t *testing.T) {
	const n = 6
	in := Shape{3, 16, 16}
	run := func(floats int) (*sizedDev, []float32, []float32) {
		d := &sizedDev{Device: newCPU(t, 2), floats: floats}
		mod := NewSequential(NewConv2d(3, 8, 3, 1, 1, false), NewConv2d(8, 4, 3, 2, 1, true))
		m, err := NewModel(d, mod, in, 3)
		if err != nil {
			t.Fatal(err)
		}
		m.SetTrain(true)
		r := rand.New(rand.NewPCG(5, 6))
		x, _ := m.Input(n)
		host := make([]float32, x.Buf.Len())
		for i := range host {
			host[i] = float32(r.NormFloat64())
		}
		if err := d.CopyIn(x.Buf, host); err != nil {
			t.Fatal(err)
		}
		d.im2cols, d.gemms = 0, 0
		y, err := m.Forward(x)
		if err != nil {
			t.Fatal(err)
		}
		out := readBuf(t, d, y.Buf)
		if err := m.Backward(y); err != nil { // dy = y: any fixed gradient will do
			t.Fatal(err)
		}
		return d, out, readBuf(t, d, m.Grads())
	}
	one, y1, g1 := run(1 << 24)
	// Forward: 1 im2col + 1 GEMM per conv; backward: 1 im2col + dW GEMM per
	// conv, and dX's GEMM for the second conv only.
	if one.im2cols != 4 || one.gemms != 5 {
		t.Errorf("one chunk per pass: %d im2cols, %d GEMMs; want 4 and 5", one.im2cols, one.gemms)
	}
	small, y2, g2 := run(1) // below one image: one image per chunk
	if small.im2cols != 4*n || small.gemms != 5*n {
		t.Errorf("one image per chunk: %d im2cols, %d GEMMs; want %d and %d", small.im2cols, small.gemms, 4*n, 5*n)
	}
	if d := relErr(y1, y2); !(d <= 1e-6) {
		t.Errorf("outputs differ by %.3g relative between chunkings", d)
	}
	if d := relErr(g1, g2); !(d <= 1e-5) {
		t.Errorf("gradients differ by %.3g relative between chunkings", d)
	}
}

func relErr(a, b []float32) float64 {
	var num, den float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		num += d * d
		den += float64(b[i]) * float64(b[i])
	}
	return math.Sqrt(num / den)
}
