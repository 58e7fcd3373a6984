package cuda_test

import (
	"errors"
	"fmt"

	"github.com/loaderd/loaderd/trainer/cuda"
	"github.com/loaderd/loaderd/trainer/cuda/driver"
	"github.com/loaderd/loaderd/trainer/tensor"
)

// Open a GPU, falling back to the CPU engine where there is no driver.
func ExampleNew() {
	var dev tensor.Device
	g, err := cuda.New(cuda.Config{Ordinal: 0, Driver: driver.Options{Path: "/nonexistent", Exclusive: true}})
	switch {
	case err == nil:
		dev = g
	case errors.Is(err, cuda.ErrNoDriver), errors.Is(err, cuda.ErrNoDevice):
		dev, _ = tensor.NewCPU("cpu", 2)
	default:
		fmt.Println(err)
		return
	}
	defer dev.Close()
	fmt.Println(dev.Name())
	// Output: cpu
}
