package cuda

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/loaderd/loaderd/trainer/cuda/driver"
	"github.com/loaderd/loaderd/trainer/cuda/kernels"
	"github.com/loaderd/loaderd/trainer/tensor"
)

func TestNewWithoutDriverIsTypedError(t *testing.T) {
	dir := t.TempDir()
	d, err := New(Config{Driver: driver.Options{Path: dir, Exclusive: true}})
	if d != nil || !errors.Is(err, ErrNoDriver) {
		t.Fatalf("New = %v, %v; want ErrNoDriver", d, err)
	}
	var le *driver.LibError
	if !errors.As(err, &le) || !slices.Contains(le.Dirs, dir) {
		t.Fatalf("err %v lacks *driver.LibError naming %s", err, dir)
	}
	if !strings.Contains(err.Error(), "no CUDA driver: libcuda.so.1 not found in "+dir) {
		t.Fatalf("message %q", err)
	}
}

// The kernel table and the embedded sources must agree: every launched
// kernel exists, and no kernel is compiled for nothing.
func TestKernelTableMatchesSources(t *testing.T) {
	var src []string
	for _, s := range kernels.Sources() {
		src = append(src, s.Entries...)
	}
	tab := slices.Clone(kernelNames[:])
	slices.Sort(src)
	slices.Sort(tab)
	if !slices.Equal(src, tab) {
		t.Fatalf("kernel table %v\nsources      %v", tab, src)
	}
}

// Argument checks run before any driver call, so they work on an unopened
// device: each bad call must leave the CPU device's kind of error.
func TestValidationWithoutGPU(t *testing.T) {
	cpu, err := tensor.NewCPU("host", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer cpu.Close()
	foreign, _ := cpu.Alloc(tensor.F32, 4)
	d := &Device{name: "fake"}
	g, _ := tensor.NewConvGeom(1, 4, 4, 3, 3, 1, 1)
	tests := []struct {
		name string
		call func()
		want error
	}{
		{"zero buffer", func() { d.Fill(tensor.Buffer{}, 1) }, tensor.ErrArg},
		{"foreign buffer", func() { d.Scale(foreign, 2) }, tensor.ErrDevice},
		{"negative dims", func() { d.AddBias(tensor.Buffer{}, tensor.Buffer{}, -1, 2, 3) }, tensor.ErrArg},
		{"bad geometry", func() { g2 := g; g2.OH++; d.Im2Col(foreign, foreign, g2, 1) }, tensor.ErrArg},
		{"gemm negative", func() {
			d.Gemm(tensor.NoTrans, tensor.NoTrans, -1, 1, 1, 1, foreign, 1, foreign, 1, 0, foreign, 1)
		}, tensor.ErrArg},
		{"softmax zero rows", func() { d.SoftmaxCE(foreign, foreign, foreign, foreign, 0, 3, 0) }, tensor.ErrArg},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d.err = nil
			tc.call()
			if !errors.Is(d.Err(), tc.want) {
				t.Fatalf("Err() = %v, want %v", d.Err(), tc.want)
			}
		})
	}
	d.dead = true
	if _, err := d.Alloc(tensor.F32, 4); !errors.Is(err, tensor.ErrClosed) {
		t.Fatalf("alloc on closed device: %v", err)
	}
}

func TestArgPacking(t *testing.T) {
	d := &Device{}
	d.ptr(0x1234_5678_9abc)
	d.i32(-2)
	d.f32(1.5)
	want := []uint64{0x1234_5678_9abc, 0xffff_fffe, 0x3fc0_0000}
	if d.na != 3 || !slices.Equal(d.slot[:3], want) {
		t.Fatalf("slots %#x (na %d), want %#x", d.slot[:d.na], d.na, want)
	}
	if g := grid(1); g != 1 {
		t.Fatalf("grid(1) = %d", g)
	}
	if g := grid(1 << 40); g != maxBlocks {
		t.Fatalf("grid(2^40) = %d", g)
	}
}
