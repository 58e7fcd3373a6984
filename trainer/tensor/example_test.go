package tensor_test

import (
	"fmt"

	"github.com/loaderd/loaderd/trainer/tensor"
)

func ExampleCPU_Gemm() {
	dev, err := tensor.NewCPU("cpu0", 2)
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	a, _ := dev.Alloc(tensor.F32, 6) // 2×3
	b, _ := dev.Alloc(tensor.F32, 6) // 3×2
	c, _ := dev.Alloc(tensor.F32, 4) // 2×2
	dev.CopyIn(a, []float32{1, 2, 3, 4, 5, 6})
	dev.CopyIn(b, []float32{1, 0, 0, 1, 1, 1})
	dev.Gemm(tensor.NoTrans, tensor.NoTrans, 2, 2, 3, 1, a, 3, b, 2, 0, c, 2)
	out := make([]float32, 4)
	if err := dev.CopyOut(out, c); err != nil { // also reports kernel errors
		panic(err)
	}
	fmt.Println(out)
	// Output: [4 5 10 11]
}

func ExampleBuffer_Slice() {
	dev, _ := tensor.NewCPU("cpu0", 1)
	defer dev.Close()
	b, _ := dev.Alloc(tensor.F32, 4)
	dev.Fill(b.Slice(1, 2), 7) // views cost nothing and work with every kernel
	out := make([]float32, 4)
	dev.CopyOut(out, b)
	fmt.Println(out)
	// Output: [0 7 7 0]
}
