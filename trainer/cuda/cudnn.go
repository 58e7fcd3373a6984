package cuda

import (
	"fmt"
	"strconv"
	"unsafe"

	"github.com/loaderd/loaderd/trainer/cuda/driver"
	"github.com/loaderd/loaderd/trainer/tensor"
)

// dnn is the Device's cuDNN state: one handle on the device's stream, a
// plan per convolution shape, and one workspace shared by every call
// (calls are ordered on the one stream, so they never overlap).
type dnn struct {
	lib     *driver.CUDNN
	h       uintptr
	math    int32 // DNNFMAMath (f32) or DNNDefaultMath (TF32 allowed)
	measure bool  // choose algorithms by running them (FindEx), else heuristics
	plans   map[convKey]*convPlan
	ws      driver.DevicePtr
	wsBytes uint64
	wsTried bool
	wsCap   uint64 // workspaceCap; tests shrink it
}

// convKey names one convolution: geometry, output channels, batch.
type convKey struct {
	g       tensor.ConvGeom
	cout, n int
}

// convPlan holds the descriptors of one convolution and the algorithm
// chosen for each pass (-1 until chosen).
type convPlan struct {
	key           convKey
	x, y, w, conv uintptr // x also describes dx, y also dy, w also dw
	algo          [3]int32
	wsBytes       [3]uint64
}

// The three passes of a convolution, indices into convPlan.algo.
const (
	passFwd = iota
	passBwdData
	passBwdFilter
)

var passNames = [3]string{"forward", "backward data", "backward filter"}

// workspaceCap bounds cuDNN's workspace: enough for the fast algorithms
// of ResNet-sized layers at batch 512, small beside a data-centre GPU.
const workspaceCap = 512 << 20

type dnnError struct {
	op     string
	status int32
	msg    string
}

func (e *dnnError) Error() string {
	s := "cuda: " + e.op + ": cuDNN status " + strconv.Itoa(int(e.status))
	if e.msg != "" {
		s += " (" + e.msg + ")"
	}
	return s
}

func (d *Device) dnnFail(op string, st int32) bool {
	if st == driver.DNNSuccess {
		return false
	}
	e := &dnnError{op: op, status: st}
	if d.dnn != nil && d.dnn.lib.GetErrorString != nil {
		e.msg = d.dnn.lib.GetErrorString(st)
	}
	d.fail(e)
	return true
}

// loadCUDNN binds cuDNN to the stream; without it convolutions run as
// im2col and GEMM, and CUDNN says why.
func (d *Device) loadCUDNN(cfg Config) {
	if cfg.NoCUDNN {
		d.dnnWhy = "turned off"
		return
	}
	l, err := driver.LoadCUDNN(cfg.CUDNN)
	if err != nil {
		d.dnnWhy = err.Error()
		return
	}
	if err := d.useCUDNN(l, cfg); err != nil {
		l.Close()
		d.dnnWhy = err.Error()
	}
}

// useCUDNN creates a handle of l on the device's stream.
func (d *Device) useCUDNN(l *driver.CUDNN, cfg Config) error {
	var h uintptr
	if st := l.Create(&h); st != driver.DNNSuccess {
		return &dnnError{op: "cudnnCreate", status: st}
	}
	if st := l.SetStream(h, d.stream); st != driver.DNNSuccess {
		l.Destroy(h)
		return &dnnError{op: "cudnnSetStream", status: st}
	}
	math := int32(driver.DNNFMAMath)
	if cfg.TF32 {
		math = driver.DNNDefaultMath
	}
	d.dnn = &dnn{lib: l, h: h, math: math, measure: !cfg.CUDNNHeuristic,
		plans: map[convKey]*convPlan{}, wsCap: workspaceCap}
	return nil
}

// HasCUDNN reports whether convolutions run on cuDNN.
func (d *Device) HasCUDNN() bool { return d.dnn != nil }

// CUDNN says what runs the convolutions: "cuDNN 9.x.y (path)", or "own
// kernels (im2col + GEMM): " and why cuDNN is not used.
func (d *Device) CUDNN() string {
	if d.dnn == nil {
		return "own kernels (im2col + GEMM): cuDNN " + d.dnnWhy
	}
	s := "cuDNN " + d.dnn.lib.VersionString()
	if p := d.dnn.lib.Path(); p != "" {
		s += " (" + p + ")"
	}
	return s
}

// Convolutions implements tensor.Convolver: true when cuDNN is loaded.
func (d *Device) Convolutions() bool { return d.dnn != nil && !d.dead }

func (d *Device) closeCUDNN() {
	if d.dnn == nil {
		return
	}
	l := d.dnn.lib
	for _, p := range d.dnn.plans {
		l.DestroyTensor(p.x)
		l.DestroyTensor(p.y)
		l.DestroyFilter(p.w)
		l.DestroyConv(p.conv)
	}
	if d.dnn.ws != 0 {
		d.cu.MemFree(d.dnn.ws)
	}
	l.Destroy(d.dnn.h)
	l.Close()
	d.dnn = nil
}

// plan returns the descriptors for one convolution, made on first use.
func (d *Device) plan(g tensor.ConvGeom, cout, n int) (*convPlan, bool) {
	k := convKey{g, cout, n}
	if p := d.dnn.plans[k]; p != nil {
		return p, true
	}
	l := d.dnn.lib
	p := &convPlan{key: k, algo: [3]int32{-1, -1, -1}}
	ok := !d.dnnFail("cudnnCreateTensorDescriptor", l.CreateTensor(&p.x)) &&
		!d.dnnFail("cudnnCreateTensorDescriptor", l.CreateTensor(&p.y)) &&
		!d.dnnFail("cudnnCreateFilterDescriptor", l.CreateFilter(&p.w)) &&
		!d.dnnFail("cudnnCreateConvolutionDescriptor", l.CreateConv(&p.conv))
	if ok {
		xs, ys := nchwStrides(g.C, g.H, g.W), nchwStrides(cout, g.OH, g.OW)
		ok = !d.dnnFail("cudnnSetTensor4dDescriptorEx x", l.SetTensor4dEx(p.x, driver.DNNFloat,
			int32(n), int32(g.C), int32(g.H), int32(g.W), xs[0], xs[1], xs[2], xs[3])) &&
			!d.dnnFail("cudnnSetTensor4dDescriptorEx y", l.SetTensor4dEx(p.y, driver.DNNFloat,
				int32(n), int32(cout), int32(g.OH), int32(g.OW), ys[0], ys[1], ys[2], ys[3])) &&
			!d.dnnFail("cudnnSetFilter4dDescriptor", l.SetFilter4d(p.w, driver.DNNFloat, driver.DNNFormatNCHW,
				int32(cout), int32(g.C), int32(g.KH), int32(g.KW))) &&
			!d.dnnFail("cudnnSetConvolution2dDescriptor", l.SetConv2d(p.conv, int32(g.Pad), int32(g.Pad),
				int32(g.Stride), int32(g.Stride), 1, 1, driver.DNNCrossCorrelation, driver.DNNFloat)) &&
			!d.dnnFail("cudnnSetConvolutionMathType", l.SetConvMath(p.conv, d.dnn.math))
	}
	d.dnn.plans[k] = p // destroyed at Close, made or not
	return p, ok
}

// nchwStrides returns the element strides of a packed NCHW tensor with
// c channels of h×w (per n, c, h, w).
func nchwStrides(c, h, w int) [4]int32 {
	return [4]int32{int32(c * h * w), int32(h * w), int32(w), 1}
}

// workspace allocates the shared workspace once: workspaceCap, or a
// sixteenth of the GPU if that is less; none if the GPU has no room, and
// then only algorithms that need none are chosen.
func (d *Device) workspace() (driver.DevicePtr, uint64) {
	w := d.dnn
	if !w.wsTried {
		w.wsTried = true
		n := w.wsCap
		if d.mem > 0 {
			n = min(n, d.mem/16)
		}
		if d.cu.MemAlloc(&w.ws, n) == driver.Success {
			w.wsBytes = n
		} else {
			w.ws = 0
		}
	}
	return w.ws, w.wsBytes
}

// convOperands checks the three operands of a convolution and returns their
// device addresses; ok is false (and the error sticky) when one is wrong.
func (d *Device) convOperands(op string, x, w, y tensor.Buffer, g tensor.ConvGeom, cout, n int) (px, pw, py driver.DevicePtr, ok bool) {
	if n <= 0 || cout <= 0 || !validGeom(g) {
		d.fail(argError(op, "geometry %+v, cout %d, n %d", g, cout, n))
		return 0, 0, 0, false
	}
	xs, ys, ws := int64(n)*int64(g.C*g.H*g.W), int64(n)*int64(cout*g.P()), int64(cout)*int64(g.K())
	if xs > 1<<31-1 || ys > 1<<31-1 {
		d.fail(argError(op, "tensor beyond 2³¹ elements"))
		return 0, 0, 0, false
	}
	var ok1, ok2, ok3 bool
	px, ok1 = d.fp(op, x, int(xs))
	pw, ok2 = d.fp(op, w, int(ws))
	py, ok3 = d.fp(op, y, int(ys))
	return px, pw, py, ok1 && ok2 && ok3
}

func validGeom(g tensor.ConvGeom) bool {
	h, err := tensor.NewConvGeom(g.C, g.H, g.W, g.KH, g.KW, g.Stride, g.Pad)
	return err == nil && h == g
}

// ConvForward implements tensor.Convolver.
func (d *Device) ConvForward(y, x, w tensor.Buffer, g tensor.ConvGeom, cout, n int) {
	d.convPass(passFwd, x, w, y, g, cout, n, 0)
}

// ConvBackwardData implements tensor.Convolver.
func (d *Device) ConvBackwardData(dx, dy, w tensor.Buffer, g tensor.ConvGeom, cout, n int) {
	d.convPass(passBwdData, dx, w, dy, g, cout, n, 0)
}

// ConvBackwardFilter implements tensor.Convolver.
func (d *Device) ConvBackwardFilter(dw, x, dy tensor.Buffer, g tensor.ConvGeom, cout, n int, beta float32) {
	d.convPass(passBwdFilter, x, dw, dy, g, cout, n, beta)
}

// convPass runs one pass; x, w and y are the input-, filter- and
// output-shaped operands whichever of them the pass writes.
func (d *Device) convPass(pass int, x, w, y tensor.Buffer, g tensor.ConvGeom, cout, n int, beta float32) {
	op := "conv " + passNames[pass]
	if d.dnn == nil {
		d.fail(argError(op, "no cuDNN on %s", d.name))
		return
	}
	px, pw, py, ok := d.convOperands(op, x, w, y, g, cout, n)
	if !ok || !d.enter() {
		return
	}
	defer d.leave()
	p, ok := d.plan(g, cout, n)
	if !ok {
		return
	}
	if p.algo[pass] < 0 && !d.chooseAlgo(p, pass, px, pw, py, beta) {
		return
	}
	ws, _ := d.workspace()
	l, h, algo, wb := d.dnn.lib, d.dnn.h, p.algo[pass], p.wsBytes[pass]
	one, b := float32(1), beta
	a1, bp := unsafe.Pointer(&one), unsafe.Pointer(&b)
	t0 := d.profStart()
	var st int32
	switch pass {
	case passFwd:
		st = l.ConvFwd(h, a1, p.x, px, p.w, pw, p.conv, algo, ws, wb, bp, p.y, py)
	case passBwdData:
		st = l.ConvBwdData(h, a1, p.w, pw, p.y, py, p.conv, algo, ws, wb, bp, p.x, px)
	default:
		st = l.ConvBwdFilt(h, a1, p.x, px, p.y, py, p.conv, algo, ws, wb, bp, p.w, pw)
	}
	d.dnnFail("cudnnConvolution "+passNames[pass], st)
	if d.prof != nil {
		d.profEnd(t0, fmt.Sprintf("cudnn %s c=%d→%d %dx%d k%d/s%d algo %d", passNames[pass], g.C, cout, g.H, g.W, g.KH, g.Stride, algo))
	}
}

// chooseAlgo picks the algorithm of one pass of p, once: the fastest
// measured on the real operands (FindEx, as PyTorch's cudnn.benchmark
// does), or cuDNN's heuristic order where measuring is off or fails; in
// both the first that succeeds and whose workspace fits.
func (d *Device) chooseAlgo(p *convPlan, pass int, px, pw, py driver.DevicePtr, beta float32) bool {
	l, h := d.dnn.lib, d.dnn.h
	ws, wsBytes := d.workspace()
	var perf [16]driver.DNNAlgoPerf
	var got int32
	st := int32(-1)
	// FindEx writes the pass's output, so not where beta keeps what is there.
	if d.dnn.measure && (pass != passBwdFilter || beta == 0) {
		switch pass {
		case passFwd:
			st = l.FindFwdAlgo(h, p.x, px, p.w, pw, p.conv, p.y, py, int32(len(perf)), &got, &perf[0], ws, wsBytes)
		case passBwdData:
			st = l.FindBwdDAlgo(h, p.w, pw, p.y, py, p.conv, p.x, px, int32(len(perf)), &got, &perf[0], ws, wsBytes)
		default:
			st = l.FindBwdFAlgo(h, p.x, px, p.y, py, p.conv, p.w, pw, int32(len(perf)), &got, &perf[0], ws, wsBytes)
		}
	}
	if st != driver.DNNSuccess {
		switch pass {
		case passFwd:
			st = l.GetFwdAlgo(h, p.x, p.w, p.conv, p.y, int32(len(perf)), &got, &perf[0])
		case passBwdData:
			st = l.GetBwdDAlgo(h, p.w, p.y, p.conv, p.x, int32(len(perf)), &got, &perf[0])
		default:
			st = l.GetBwdFAlgo(h, p.x, p.y, p.conv, p.w, int32(len(perf)), &got, &perf[0])
		}
		if d.dnnFail("cudnnGetConvolution algorithm ("+passNames[pass]+")", st) {
			return false
		}
	}
	for _, pf := range perf[:min(int(got), len(perf))] {
		if pf.Status != driver.DNNSuccess {
			continue
		}
		var need uint64
		switch pass {
		case passFwd:
			st = l.FwdWorkspace(h, p.x, p.w, p.conv, p.y, pf.Algo, &need)
		case passBwdData:
			st = l.BwdDWorkspace(h, p.w, p.y, p.conv, p.x, pf.Algo, &need)
		default:
			st = l.BwdFWorkspace(h, p.x, p.y, p.conv, p.w, pf.Algo, &need)
		}
		if st != driver.DNNSuccess || need > wsBytes {
			continue
		}
		p.algo[pass], p.wsBytes[pass] = pf.Algo, need
		return true
	}
	d.fail(fmt.Errorf("cuda: cuDNN has no %s algorithm for %+v, cout %d, batch %d within a %d-byte workspace: %w",
		passNames[pass], p.key.g, p.key.cout, p.key.n, wsBytes, tensor.ErrArg))
	return false
}
