package tensor

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func near(t *testing.T, name string, got []float32, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", name, len(got), len(want))
	}
	for i := range got {
		if d := math.Abs(float64(got[i]) - want[i]); d > tol*(1+math.Abs(want[i])) || math.IsNaN(float64(got[i])) {
			t.Fatalf("%s[%d] = %g, want %g", name, i, got[i], want[i])
		}
	}
}

// TestElementwise runs each element-wise kernel on sizes that split into
// several chunks across workers and compares with a scalar loop.
func TestElementwise(t *testing.T) {
	for _, workers := range []int{1, 3} {
		for _, n := range []int{1, 7, 3*elemGrain + 5} {
			t.Run(fmt.Sprintf("workers=%d/n=%d", workers, n), func(t *testing.T) {
				d := newCPU(t, workers)
				r := rand.New(rand.NewPCG(uint64(n), 1))
				xa, ya := randVec(r, n), randVec(r, n)
				want := func(f func(x, y float64) float64) []float64 {
					w := make([]float64, n)
					for i := range w {
						w[i] = f(float64(xa[i]), float64(ya[i]))
					}
					return w
				}
				x, y, z := upload(t, d, xa), upload(t, d, ya), upload(t, d, make([]float32, n))
				reset := func() { d.CopyIn(x, xa); d.CopyIn(y, ya) }
				d.Add(z, x, y)
				near(t, "add", download(t, d, z), want(func(a, b float64) float64 { return a + b }), 1e-6)
				d.Axpy(-0.5, x, y)
				near(t, "axpy", download(t, d, y), want(func(a, b float64) float64 { return b - 0.5*a }), 1e-6)
				reset()
				d.Scale(x, 3)
				near(t, "scale", download(t, d, x), want(func(a, _ float64) float64 { return 3 * a }), 1e-6)
				reset()
				d.ReLU(z, x)
				near(t, "relu", download(t, d, z), want(func(a, _ float64) float64 { return math.Max(a, 0) }), 0)
				d.ReLUBackward(z, y, z) // dy = y, mask from relu(x)
				near(t, "relu_backward", download(t, d, z), want(func(a, b float64) float64 {
					if a > 0 {
						return b
					}
					return 0
				}), 0)
				den := upload(t, d, []float32{4})
				d.DivScalar(z, x, den)
				near(t, "divscalar", download(t, d, z), want(func(a, _ float64) float64 { return a / 4 }), 1e-7)
				d.Copy(z, y)
				near(t, "copy", download(t, d, z), want(func(_, b float64) float64 { return b }), 0)
				d.Fill(z, 2.5)
				near(t, "fill", download(t, d, z), want(func(_, _ float64) float64 { return 2.5 }), 0)
				if err := d.Sync(); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

func TestReductions(t *testing.T) {
	const outer, c, inner = 3, 5, 7001 // channels big enough to split rows
	for _, workers := range []int{1, 3} {
		d := newCPU(t, workers)
		r := rand.New(rand.NewPCG(2, uint64(workers)))
		xa := randVec(r, outer*c*inner)
		for i := range xa {
			xa[i] += 3 // a mean far from zero tests the deviation sums
		}
		ma := randVec(r, c)
		x, m := upload(t, d, xa), upload(t, d, ma)
		sum, sq := make([]float64, c), make([]float64, c)
		rows := make([]float64, outer*c)
		for o := 0; o < outer; o++ {
			for j := 0; j < c; j++ {
				for i := 0; i < inner; i++ {
					v := float64(xa[(o*c+j)*inner+i])
					sum[j] += v
					sq[j] += (v - float64(ma[j])) * (v - float64(ma[j]))
					rows[o*c+j] += 0.5 * v
				}
			}
		}
		dst := upload(t, d, make([]float32, c))
		d.ChannelSum(dst, x, outer, c, inner)
		near(t, "channelsum", download(t, d, dst), sum, 1e-6)
		d.ChannelSqDev(dst, x, m, outer, c, inner)
		near(t, "channelsqdev", download(t, d, dst), sq, 1e-6)
		rs := upload(t, d, make([]float32, outer*c))
		d.RowSum(rs, x, outer*c, inner, 0.5)
		near(t, "rowsum", download(t, d, rs), rows, 1e-6)
		full := upload(t, d, make([]float32, outer*c*inner))
		d.RowBroadcast(full, rs, outer*c, inner, 2)
		rsHost := download(t, d, rs)
		for i, v := range download(t, d, full) {
			if v != 2*rsHost[i/inner] {
				t.Fatalf("rowbroadcast[%d] = %g, want %g", i, v, 2*rsHost[i/inner])
			}
		}
		b := upload(t, d, []float32{1, 2, 3, 4, 5})
		d.AddBias(x, b, outer, c, inner)
		gx := download(t, d, x)
		for i, v := range gx {
			if w := xa[i] + float32((i/inner)%c+1); v != w {
				t.Fatalf("addbias[%d] = %g, want %g", i, v, w)
			}
		}
		tr := upload(t, d, make([]float32, outer*c*inner))
		d.Transpose12(tr, x, outer, c, inner)
		gt := download(t, d, tr)
		for j := 0; j < c; j++ {
			for o := 0; o < outer; o++ {
				if gt[(j*outer+o)*inner+11] != gx[(o*c+j)*inner+11] {
					t.Fatalf("transpose12 (%d,%d) wrong", o, j)
				}
			}
		}
		if err := d.Sync(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestIm2ColAdjoint checks Im2Col against a direct gather and Col2Im as its
// adjoint: <Im2Col(x), c> = <x, Col2Im(c)> for random x and c.
func TestIm2ColAdjoint(t *testing.T) {
	geoms := [][7]int{{2, 5, 6, 3, 3, 1, 1}, {3, 7, 7, 3, 3, 2, 1}, {1, 4, 4, 1, 1, 2, 0}, {2, 6, 5, 2, 3, 1, 2}, {1, 3, 3, 5, 5, 1, 2}}
	for _, gv := range geoms {
		g, err := NewConvGeom(gv[0], gv[1], gv[2], gv[3], gv[4], gv[5], gv[6])
		if err != nil {
			t.Fatal(err)
		}
		const n = 3
		d := newCPU(t, 2)
		r := rand.New(rand.NewPCG(4, 4))
		xa, ca := randVec(r, n*g.C*g.H*g.W), randVec(r, g.K()*n*g.P())
		x, col := upload(t, d, xa), upload(t, d, make([]float32, len(ca)))
		d.Im2Col(col, x, g, n)
		got := download(t, d, col)
		for row := 0; row < g.K(); row++ {
			c, ky, kx := row/(g.KH*g.KW), row/g.KW%g.KH, row%g.KW
			for img := 0; img < n; img++ {
				for oy := 0; oy < g.OH; oy++ {
					for ox := 0; ox < g.OW; ox++ {
						iy, ix := oy*g.Stride-g.Pad+ky, ox*g.Stride-g.Pad+kx
						want := float32(0)
						if iy >= 0 && ix >= 0 && iy < g.H && ix < g.W {
							want = xa[((img*g.C+c)*g.H+iy)*g.W+ix]
						}
						if v := got[row*n*g.P()+img*g.P()+oy*g.OW+ox]; v != want {
							t.Fatalf("%+v: col[%d][%d,%d,%d] = %g, want %g", g, row, img, oy, ox, v, want)
						}
					}
				}
			}
		}
		lhs := 0.0
		for i := range got {
			lhs += float64(got[i]) * float64(ca[i])
		}
		d.CopyIn(col, ca)
		dx := upload(t, d, make([]float32, len(xa)))
		d.Col2Im(dx, col, g, n)
		rhs := 0.0
		for i, v := range download(t, d, dx) {
			rhs += float64(v) * float64(xa[i])
		}
		if math.Abs(lhs-rhs) > 1e-4*(1+math.Abs(lhs)) {
			t.Errorf("%+v: <im2col x, c> = %g, <x, col2im c> = %g", g, lhs, rhs)
		}
	}
}

func TestMaxPool(t *testing.T) {
	d := newCPU(t, 2)
	g, _ := NewPoolGeom(1, 4, 4, 2, 2)
	x := upload(t, d, []float32{
		1, 5, 2, 0,
		3, 4, 8, 1,
		0, 0, 9, 9,
		7, 0, 9, 2})
	y, idx := upload(t, d, make([]float32, 4)), uploadI(t, d, make([]int32, 4))
	d.MaxPool(y, idx, x, g, 1)
	near(t, "maxpool", download(t, d, y), []float64{5, 8, 7, 9}, 0)
	dy, dx := upload(t, d, []float32{1, 2, 3, 4}), upload(t, d, make([]float32, 16))
	d.MaxPoolBackward(dx, dy, idx, g, 1)
	// Ties go to the first maximum in scan order, as in PyTorch.
	near(t, "maxpool_backward", download(t, d, dx), []float64{0, 1, 0, 0, 0, 0, 2, 0, 0, 0, 4, 0, 3, 0, 0, 0}, 0)
}

func TestStickyErrors(t *testing.T) {
	d := newCPU(t, 1)
	a, b := upload(t, d, make([]float32, 4)), upload(t, d, make([]float32, 3))
	lab := uploadI(t, d, []int32{0, 5})
	cases := []struct {
		name string
		run  func()
	}{
		{"length mismatch", func() { d.Add(a, a, b) }},
		{"zero buffer", func() { d.Fill(Buffer{}, 1) }},
		{"out-of-range slice", func() { d.Fill(a.Slice(2, 3), 1) }},
		{"dtype", func() { d.ReLU(lab, lab) }},
		{"label out of range", func() { d.SoftmaxCE(b.Slice(0, 2), a, a, lab, 2, 2, 0) }},
		{"negative sizes", func() { d.Transpose12(b.Slice(0, 2), b.Slice(0, 2), -1, -2, 1) }},
		{"hand-made geometry", func() { d.Im2Col(a, a, ConvGeom{C: -1, H: 2, W: 2, KH: 1, KW: 1, Stride: 1, OH: 2, OW: 2}, 1) }},
		{"negative gemm size", func() { d.Gemm(NoTrans, NoTrans, -1, 1, 1, 1, a, 1, a, 1, 0, a, 1) }},
	}
	for _, tc := range cases {
		before := download(t, d, a)
		tc.run()
		if err := d.Err(); !errors.Is(err, ErrArg) {
			t.Errorf("%s: Err() = %v, want ErrArg", tc.name, err)
		}
		if err := d.Sync(); err == nil {
			t.Errorf("%s: Sync returned nil", tc.name)
		}
		if d.Sync() != nil {
			t.Errorf("%s: Sync did not clear the error", tc.name)
		}
		if after := download(t, d, a); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("%s: a failing kernel wrote memory", tc.name)
		}
	}
	if err := d.CopyIn(a, make([]float32, 5)); !errors.Is(err, ErrArg) {
		t.Errorf("CopyIn length: %v", err)
	}
	other := newCPU(t, 1)
	d.Copy(a, upload(t, other, make([]float32, 4)))
	if err := d.Sync(); !errors.Is(err, ErrDevice) {
		t.Errorf("foreign buffer: %v", err)
	}
	f := upload(t, d, make([]float32, 2))
	if err := d.Free(f); err != nil {
		t.Fatal(err)
	}
	d.Fill(f, 1)
	if err := d.Sync(); !errors.Is(err, ErrArg) {
		t.Errorf("use after free: %v", err)
	}
	d.Close()
	if _, err := d.Alloc(F32, 4); !errors.Is(err, ErrClosed) {
		t.Errorf("alloc after close: %v", err)
	}
}

func TestSliceViews(t *testing.T) {
	d := newCPU(t, 1)
	b := upload(t, d, []float32{0, 1, 2, 3, 4, 5})
	s := b.Slice(2, 3).Slice(1, 2) // elements 3, 4
	if s.Len() != 2 || s.Offset() != 3 || s.Device() != Device(d) || s.DType() != F32 {
		t.Fatalf("slice: len %d off %d", s.Len(), s.Offset())
	}
	d.Scale(s, 10)
	near(t, "scaled view", download(t, d, b), []float64{0, 1, 2, 30, 40, 5}, 0)
	if b.Slice(5, 2).Valid() || b.Slice(-1, 1).Valid() {
		t.Error("out-of-range slices must be invalid")
	}
}
