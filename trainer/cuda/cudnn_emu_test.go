//go:build linux && (amd64 || arm64)

package cuda

import (
	"math"
	"strings"
	"testing"
	"unsafe"

	"github.com/loaderd/loaderd/trainer/cuda/driver"
	"github.com/loaderd/loaderd/trainer/tensor"
)

// emuDNN stands in for cuDNN over emulated memory, written from cuDNN's
// definitions rather than from the Device's code: descriptors keep what
// they were set to, and each pass walks the tensors by the strides their
// descriptors give, so a wrong shape, stride, padding or operand order
// computes another function than the CPU engine's. Its algorithms: 0
// needs no workspace, 1 needs 512 bytes, 2 more than any test allows.
type emuDNN struct {
	t       *testing.T
	m       *emuMem
	next    uintptr
	tensors map[uintptr][8]int32 // n c h w, then their strides
	filters map[uintptr][4]int32 // k c h w
	convs   map[uintptr][3]int32 // pad, stride, math
	runs    map[int32]int        // passes run per algorithm
	finds   int
}

const emuDNNBadParam = 3 // CUDNN_STATUS_BAD_PARAM

var emuAlgoWorkspace = map[int32]uint64{0: 0, 1: 512, 2: 1 << 40}

func newEmuDNN(t *testing.T, m *emuMem) *emuDNN {
	return &emuDNN{t: t, m: m, next: 1, tensors: map[uintptr][8]int32{}, filters: map[uintptr][4]int32{},
		convs: map[uintptr][3]int32{}, runs: map[int32]int{}}
}

// use gives d this emulated cuDNN (f32 math unless tf32).
func (e *emuDNN) use(d *Device, tf32 bool) {
	if err := d.useCUDNN(e.lib(), Config{TF32: tf32}); err != nil {
		e.t.Fatal(err)
	}
	d.dnn.wsCap = 1 << 16
}

func (e *emuDNN) handle(p *uintptr) int32 { *p = e.next; e.next++; return 0 }

func (e *emuDNN) lib() *driver.CUDNN {
	ok := func(uintptr) int32 { return 0 }
	perf := func(got *int32, p *driver.DNNAlgoPerf) int32 {
		out := unsafe.Slice(p, 3)
		for i, a := range []int32{2, 1, 0} {
			out[i] = driver.DNNAlgoPerf{Algo: a, Memory: emuAlgoWorkspace[a]}
		}
		*got = 3
		return 0
	}
	size := func(algo int32, b *uint64) int32 { *b = emuAlgoWorkspace[algo]; return 0 }
	return &driver.CUDNN{
		GetErrorString: func(st int32) string { return "emulated status" },
		Create:         e.handle,
		Destroy:        ok,
		SetStream:      func(uintptr, driver.Stream) int32 { return 0 },
		CreateTensor:   e.handle, DestroyTensor: ok,
		CreateFilter: e.handle, DestroyFilter: ok,
		CreateConv: e.handle, DestroyConv: ok,
		SetTensor4dEx: func(d uintptr, dt int32, n, c, h, w, ns, cs, hs, ws int32) int32 {
			if dt != driver.DNNFloat {
				return emuDNNBadParam
			}
			e.tensors[d] = [8]int32{n, c, h, w, ns, cs, hs, ws}
			return 0
		},
		SetFilter4d: func(d uintptr, dt, format int32, k, c, h, w int32) int32 {
			if dt != driver.DNNFloat || format != driver.DNNFormatNCHW {
				return emuDNNBadParam
			}
			e.filters[d] = [4]int32{k, c, h, w}
			return 0
		},
		SetConv2d: func(d uintptr, ph, pw, u, v, dh, dw int32, mode, compute int32) int32 {
			if ph != pw || u != v || dh != 1 || dw != 1 || mode != driver.DNNCrossCorrelation || compute != driver.DNNFloat {
				return emuDNNBadParam
			}
			e.convs[d] = [3]int32{ph, u, -1}
			return 0
		},
		SetConvMath: func(d uintptr, m int32) int32 {
			c := e.convs[d]
			c[2] = m
			e.convs[d] = c
			return 0
		},
		GetFwdAlgo:  func(_, _, _, _, _ uintptr, _ int32, got *int32, p *driver.DNNAlgoPerf) int32 { return perf(got, p) },
		GetBwdDAlgo: func(_, _, _, _, _ uintptr, _ int32, got *int32, p *driver.DNNAlgoPerf) int32 { return perf(got, p) },
		GetBwdFAlgo: func(_, _, _, _, _ uintptr, _ int32, got *int32, p *driver.DNNAlgoPerf) int32 { return perf(got, p) },
		// Measuring runs the candidates: the output is left as garbage.
		FindFwdAlgo: func(_, _ uintptr, _ driver.DevicePtr, _ uintptr, _ driver.DevicePtr, _, yd uintptr, y driver.DevicePtr, _ int32, got *int32, p *driver.DNNAlgoPerf, _ driver.DevicePtr, _ uint64) int32 {
			e.finds++
			e.poison(yd, y)
			return perf(got, p)
		},
		FindBwdDAlgo: func(_, _ uintptr, _ driver.DevicePtr, _ uintptr, _ driver.DevicePtr, _, xd uintptr, x driver.DevicePtr, _ int32, got *int32, p *driver.DNNAlgoPerf, _ driver.DevicePtr, _ uint64) int32 {
			e.finds++
			e.poison(xd, x)
			return perf(got, p)
		},
		FindBwdFAlgo: func(_, _ uintptr, _ driver.DevicePtr, _ uintptr, _ driver.DevicePtr, _, wd uintptr, w driver.DevicePtr, _ int32, got *int32, p *driver.DNNAlgoPerf, _ driver.DevicePtr, _ uint64) int32 {
			e.finds++
			f := e.filters[wd]
			v := e.m.f32s(w, int(f[0]*f[1]*f[2]*f[3]))
			for i := range v {
				v[i] = float32(math.NaN())
			}
			return perf(got, p)
		},
		FwdWorkspace:  func(_, _, _, _, _ uintptr, a int32, b *uint64) int32 { return size(a, b) },
		BwdDWorkspace: func(_, _, _, _, _ uintptr, a int32, b *uint64) int32 { return size(a, b) },
		BwdFWorkspace: func(_, _, _, _, _ uintptr, a int32, b *uint64) int32 { return size(a, b) },
		ConvFwd: func(_ uintptr, alpha unsafe.Pointer, xd uintptr, x driver.DevicePtr, wd uintptr, w driver.DevicePtr, cd uintptr, algo int32, ws driver.DevicePtr, wsb uint64, beta unsafe.Pointer, yd uintptr, y driver.DevicePtr) int32 {
			return e.run(0, algo, ws, wsb, alpha, beta, xd, x, wd, w, cd, yd, y)
		},
		ConvBwdData: func(_ uintptr, alpha unsafe.Pointer, wd uintptr, w driver.DevicePtr, dyd uintptr, dy driver.DevicePtr, cd uintptr, algo int32, ws driver.DevicePtr, wsb uint64, beta unsafe.Pointer, dxd uintptr, dx driver.DevicePtr) int32 {
			return e.run(1, algo, ws, wsb, alpha, beta, dxd, dx, wd, w, cd, dyd, dy)
		},
		ConvBwdFilt: func(_ uintptr, alpha unsafe.Pointer, xd uintptr, x driver.DevicePtr, dyd uintptr, dy driver.DevicePtr, cd uintptr, algo int32, ws driver.DevicePtr, wsb uint64, beta unsafe.Pointer, dwd uintptr, dw driver.DevicePtr) int32 {
			return e.run(2, algo, ws, wsb, alpha, beta, xd, x, dwd, dw, cd, dyd, dy)
		},
	}
}

func (e *emuDNN) poison(td uintptr, p driver.DevicePtr) {
	s := e.tensors[td]
	v := e.m.f32s(p, int(s[0]*s[1]*s[2]*s[3]))
	for i := range v {
		v[i] = float32(math.NaN())
	}
}

// run computes one pass (0 forward, 1 backward data, 2 backward filter)
// of the convolution whose input, filter and output descriptors and
// buffers are given, writing alpha·result + beta·old to the pass's output.
func (e *emuDNN) run(pass int, algo int32, ws driver.DevicePtr, wsb uint64, alpha, beta unsafe.Pointer,
	xd uintptr, x driver.DevicePtr, wd uintptr, w driver.DevicePtr, cd uintptr, yd uintptr, y driver.DevicePtr) int32 {
	xs, ys, f, c := e.tensors[xd], e.tensors[yd], e.filters[wd], e.convs[cd]
	pad, st := int(c[0]), int(c[1])
	if need := emuAlgoWorkspace[algo]; algo == 2 || wsb != need || (need > 0 && ws == 0) {
		e.t.Errorf("algorithm %d run with %d bytes of workspace at %#x", algo, wsb, ws)
		return emuDNNBadParam
	}
	N, C, H, W, K, R, S := int(xs[0]), int(xs[1]), int(xs[2]), int(xs[3]), int(f[0]), int(f[2]), int(f[3])
	OH, OW := (H+2*pad-R)/st+1, (W+2*pad-S)/st+1
	if ys[0] != xs[0] || int(ys[1]) != K || int(f[1]) != C || int(ys[2]) != OH || int(ys[3]) != OW {
		return emuDNNBadParam // descriptors that disagree: cuDNN refuses them too
	}
	span := func(s [8]int32) int { return int((s[0]-1)*s[4] + (s[1]-1)*s[5] + (s[2]-1)*s[6] + (s[3]-1)*s[7] + 1) }
	xv, yv, wv := e.m.f32s(x, span(xs)), e.m.f32s(y, span(ys)), e.m.f32s(w, K*C*R*S)
	if xv == nil || yv == nil || wv == nil {
		e.t.Errorf("emulated cuDNN pass %d: operand out of bounds", pass)
		return emuDNNBadParam
	}
	at := func(s [8]int32, n, c, h, w int) int {
		return n*int(s[4]) + c*int(s[5]) + h*int(s[6]) + w*int(s[7])
	}
	out := [3][]float32{yv, xv, wv}[pass]
	acc := make([]float64, len(out))
	for n := range N {
		for k := range K {
			for oy := range OH {
				for ox := range OW {
					yi := at(ys, n, k, oy, ox)
					for ci := range C {
						for r := range R {
							iy := oy*st - pad + r
							if iy < 0 || iy >= H {
								continue
							}
							for s := range S {
								ix := ox*st - pad + s
								if ix < 0 || ix >= W {
									continue
								}
								xi, wi := at(xs, n, ci, iy, ix), ((k*C+ci)*R+r)*S+s
								switch pass {
								case 0:
									acc[yi] += float64(xv[xi]) * float64(wv[wi])
								case 1:
									acc[xi] += float64(yv[yi]) * float64(wv[wi])
								default:
									acc[wi] += float64(yv[yi]) * float64(xv[xi])
								}
							}
						}
					}
				}
			}
		}
	}
	a, b := *(*float32)(alpha), *(*float32)(beta)
	for i := range out {
		v := a * float32(acc[i])
		if b != 0 {
			v += b * out[i]
		}
		out[i] = v
	}
	e.runs[algo]++
	return 0
}

// openEmuDNN opens an emulated device with emulated cuBLAS and cuDNN.
func openEmuDNN(t *testing.T) (*Device, *emuDNN) {
	lib := emuLibraryOf(t, false)
	cu, m := emuDriver(t, lib)
	d, err := newDevice(cu, Config{NoCache: true, NoCUBLAS: true, NoCUDNN: true, compiler: fakePTX{}})
	if err != nil {
		t.Fatal(err)
	}
	d.blas, d.blasH = emuBLAS(t, m), 1
	e := newEmuDNN(t, m)
	e.use(d, false)
	t.Cleanup(func() { d.Close() })
	return d, e
}

// Every conv layer on the emulated cuDNN computes what the CPU engine's
// im2col does, forward and both backward passes, with the algorithm that
// fits the workspace (1) chosen by measuring once per pass and shape.
func TestEmulatedCUDNNConvMatchesCPU(t *testing.T) {
	d, e := openEmuDNN(t)
	cpu := newCPU(t)
	convLayersMatch(t, cpu, d, smallConvs, 2, 1e-5)
	if e.runs[2] != 0 || e.runs[0] != 0 || e.runs[1] == 0 {
		t.Fatalf("passes run per algorithm: %v, want all with algorithm 1", e.runs)
	}
	if want := 3 * len(smallConvs); e.finds != want {
		t.Fatalf("%d measurements for %d shapes' three passes, want %d", e.finds, len(smallConvs), want)
	}
	if !d.Convolutions() || d.CUDNN() == "" {
		t.Fatalf("Convolutions() = %v, CUDNN() = %q", d.Convolutions(), d.CUDNN())
	}
}

// With heuristics instead of measurement, the same.
func TestEmulatedCUDNNHeuristicConvMatchesCPU(t *testing.T) {
	d, e := openEmuDNN(t)
	d.dnn.measure = false
	convLayersMatch(t, newCPU(t), d, smallConvs[:3], 2, 1e-5)
	if e.finds != 0 || e.runs[1] == 0 {
		t.Fatalf("finds %d, runs %v", e.finds, e.runs)
	}
}

// Whole training steps with convolutions on the emulated cuDNN match the CPU.
func TestEmulatedCUDNNTrainStepsMatchCPU(t *testing.T) {
	var e *emuDNN
	open := func(int) []tensor.Device {
		var d *Device
		d, e = openEmuDNN(t)
		return []tensor.Device{d}
	}
	trainMatchesCPU(t, open, 1, 1e-4)
	if e.runs[1] == 0 {
		t.Fatal("no pass ran on the emulated cuDNN")
	}
}

// A failing cuDNN call is a sticky error naming the call and status.
func TestEmulatedCUDNNErrorIsSticky(t *testing.T) {
	d, e := openEmuDNN(t)
	l := e.lib()
	l.ConvFwd = func(uintptr, unsafe.Pointer, uintptr, driver.DevicePtr, uintptr, driver.DevicePtr, uintptr, int32, driver.DevicePtr, uint64, unsafe.Pointer, uintptr, driver.DevicePtr) int32 {
		return 8 // CUDNN_STATUS_EXECUTION_FAILED
	}
	d.dnn.lib = l
	g, _ := tensor.NewConvGeom(2, 5, 5, 3, 3, 1, 1)
	x, _ := d.Alloc(tensor.F32, 2*50)
	w, _ := d.Alloc(tensor.F32, 3*18)
	y, _ := d.Alloc(tensor.F32, 2*75)
	d.ConvForward(y, x, w, g, 3, 2)
	err := d.Sync()
	if err == nil || !strings.Contains(err.Error(), "cudnnConvolution forward: cuDNN status 8 (emulated status)") {
		t.Fatalf("Sync() = %v", err)
	}
	d.ConvForward(y, x, w.Slice(0, 10), g, 3, 2)
	if err := d.Sync(); err == nil || !strings.Contains(err.Error(), "length 10") {
		t.Fatalf("a short filter: Sync() = %v", err)
	}
}
