package cuda

import (
	"math"
	"unsafe"

	"github.com/loaderd/loaderd/trainer/cuda/driver"
)

type kern int

// The kernels the device launches; kernelNames gives their C names.
const (
	kFill kern = iota
	kScale
	kAxpy
	kAdd
	kDiv
	kReLU
	kReLUB
	kInvStd
	kBNRunning
	kAddBias
	kRowBcast
	kT12
	kBNFwd
	kBNBwd
	kSGD
	kRowSum
	kChanSum
	kChanSq
	kBNSums
	kCount1
	kIm2Col
	kCol2Im
	kPool
	kPoolB
	kCE
	kCEB
	kScaleMat
	kGemm
	kRound
	kNonFinite
	kChanParts
	kCount
)

var kernelNames = [kCount]string{
	kFill: "fill_f32", kScale: "scale_f32", kAxpy: "axpy_f32", kAdd: "add_f32",
	kDiv: "div_scalar_f32", kReLU: "relu_f32", kReLUB: "relu_backward_f32",
	kInvStd: "bn_invstd_f32", kBNRunning: "bn_running_f32", kAddBias: "add_bias_f32",
	kRowBcast: "row_broadcast_f32", kT12: "transpose12_f32", kBNFwd: "bn_forward_f32",
	kBNBwd: "bn_backward_f32", kSGD: "sgd_f32", kRowSum: "row_sum_f32",
	kChanSum: "channel_sum_f32", kChanSq: "channel_sqdev_f32", kBNSums: "bn_grad_sums_f32",
	kCount1: "count_correct_f32", kIm2Col: "im2col_f32", kCol2Im: "col2im_f32",
	kPool: "maxpool_f32", kPoolB: "maxpool_backward_f32", kCE: "softmax_ce_f32",
	kCEB: "softmax_ce_backward_f32", kScaleMat: "scale_matrix_f32", kGemm: "gemm_f32",
	kRound: "round_f32", kNonFinite: "nonfinite_f32", kChanParts: "channel_parts_f32",
}

const (
	maxArgs = 16
	// threads is the block size of every kernel; the reductions in
	// reduce.cu assume this power of two.
	threads = 256
	// maxBlocks caps elementwise grids; the kernels loop over the rest.
	maxBlocks = 1 << 16
)

func (d *Device) arg(v uint64) {
	if d.na < maxArgs {
		d.slot[d.na] = v
	}
	d.na++
}

func (d *Device) ptr(p driver.DevicePtr) { d.arg(uint64(p)) }

// i32 passes an int parameter; the low four bytes of the slot are the
// little-endian int the kernel reads.
func (d *Device) i32(v int) { d.arg(uint64(uint32(int32(v)))) }

func (d *Device) f32(v float32) { d.arg(uint64(math.Float32bits(v))) }

// grid returns the blocks for n elements, one per thread up to maxBlocks.
func grid(n int64) uint32 {
	b := (n + threads - 1) / threads
	return uint32(max(1, min(b, maxBlocks)))
}

// launch starts kernel k with the arguments collected since the last launch.
func (d *Device) launch(op string, k kern, blocks uint32) {
	n := d.na
	d.na = 0
	if n > maxArgs {
		d.fail(argError(op, "too many kernel arguments"))
		return
	}
	for i := 0; i < n; i++ {
		d.par[i] = unsafe.Pointer(&d.slot[i])
	}
	t0 := d.profStart()
	r := d.cu.Launch(d.fn[k], blocks, 1, 1, threads, 1, 1, 0, d.stream, &d.par[0])
	if r != driver.Success {
		d.fail(d.cu.Check("cuLaunchKernel "+kernelNames[k]+" ("+op+")", r))
	}
	if d.prof != nil {
		d.profEnd(t0, op+" "+kernelNames[k])
	}
}
