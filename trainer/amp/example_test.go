package amp_test

import (
	"fmt"
	"math"

	"github.com/loaderd/loaderd/trainer/amp"
)

// One fp16 step as a training loop drives the scaler: the gradients of a
// loss multiplied by Scale are unscaled, an overflow skips the step and
// halves the scale.
func ExampleGradScaler() {
	s := amp.NewGradScaler()
	grads := []float32{float32(math.Inf(1)), 3} // backward of loss·Scale overflowed
	if found := s.Unscale(grads); found {
		fmt.Println("skip the optimizer step")
	}
	s.Update(true)
	fmt.Println("scale", s.Scale)
	// Output:
	// skip the optimizer step
	// scale 32768
}
