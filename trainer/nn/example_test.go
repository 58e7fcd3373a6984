package nn_test

import (
	"fmt"

	"github.com/loaderd/loaderd/trainer/nn"
	"github.com/loaderd/loaderd/trainer/tensor"
)

func ExampleNewModel() {
	dev, _ := tensor.NewCPU("cpu0", 2)
	defer dev.Close()
	root, _ := nn.NewCNN(nn.DefaultCNN)
	m, err := nn.NewModel(dev, root, nn.CIFAR, 1)
	if err != nil {
		panic(err)
	}
	const n = 4
	x, _ := m.Input(n) // CopyIn n NCHW images here
	labels, _ := m.Labels(n)
	dev.CopyInInt32(labels, []int32{0, 1, 2, 3})
	logits, _ := m.Forward(x)
	loss := nn.NewSoftmaxCrossEntropy(0.1)
	stats, _ := loss.Forward(m.Ctx(), logits, labels)
	dlogits, _ := loss.Backward(m.Ctx(), 1.0/n)
	if err := m.Backward(dlogits); err != nil { // fills m.Grads()
		panic(err)
	}
	st := make([]float32, 2)
	dev.CopyOut(st, stats)
	fmt.Println(logits.N, logits.Shape, m.NumParams(), st[0] > 0)
	// Output: 4 10×1×1 78042 true
}
