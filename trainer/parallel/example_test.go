package parallel_test

import (
	"fmt"

	"github.com/loaderd/loaderd/trainer/nn"
	"github.com/loaderd/loaderd/trainer/optim"
	"github.com/loaderd/loaderd/trainer/parallel"
	"github.com/loaderd/loaderd/trainer/tensor"
)

func ExampleNewDataParallel() {
	var devs []tensor.Device
	for i := range 2 { // two CPU "devices" of one goroutine each
		d, _ := tensor.NewCPU(fmt.Sprint("cpu", i), 1)
		defer d.Close()
		devs = append(devs, d)
	}
	in := nn.Shape{C: 3, H: 8, W: 8}
	build := func() (nn.Module, error) { return nn.NewMLP(in, []int{32}, 10), nil }
	dp, err := parallel.NewDataParallel(devs, build, parallel.Config{
		In: in, Seed: 1, SGD: optim.SGDConfig{Momentum: 0.9}})
	if err != nil {
		panic(err)
	}
	x := make([]float32, 6*in.Size()) // six images, NCHW
	labels := []int32{0, 1, 2, 3, 4, 5}
	st, err := dp.Step(x, labels, 0.1) // three images per device
	fmt.Println(st.N, err)
	// Output: 6 <nil>
}
