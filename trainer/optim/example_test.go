package optim_test

import (
	"fmt"

	"github.com/loaderd/loaderd/trainer/optim"
	"github.com/loaderd/loaderd/trainer/tensor"
)

func ExampleSGD() {
	dev, _ := tensor.NewCPU("cpu0", 1)
	defer dev.Close()
	w, _ := dev.Alloc(tensor.F32, 1)
	g, _ := dev.Alloc(tensor.F32, 1)
	dev.CopyIn(w, []float32{1})
	dev.CopyIn(g, []float32{0.5})
	sgd, _ := optim.NewSGD(dev, w, g, optim.SGDConfig{Momentum: 0.9, Nesterov: true})
	sgd.Step(0.1) // p ← 1 − 0.1·(0.5 + 0.9·0.5)
	out := make([]float32, 1)
	dev.CopyOut(out, w)
	fmt.Printf("%.3f\n", out[0])
	// Output: 0.905
}

func ExampleOneCycle() {
	s := optim.NewOneCycle(0.4, 100)
	for _, step := range []int{0, 29, 99} {
		fmt.Printf("step %d: lr %.6f momentum %.2f\n", step, s.LR(step), s.Momentum(step))
	}
	// Output:
	// step 0: lr 0.016000 momentum 0.95
	// step 29: lr 0.400000 momentum 0.85
	// step 99: lr 0.000002 momentum 0.95
}
