package sampler_test

import (
	"fmt"

	"github.com/loaderd/loaderd/sampler"
)

// Class-balanced sampling, as PyTorch's WeightedRandomSampler(1/count,
// num_samples=8, replacement=True) does it: a dataset of four samples of
// class 0 and one of class 1 (index 4), weighted 1/4 and 1/1, drawn 8
// times per epoch and split over two ranks. Index 4 comes about as often
// as the other four together; the draws are keyed by (seed, epoch), so
// every run, rank and resume sees the same ones.
func ExampleNewWeights() {
	w, err := sampler.NewWeights([]float64{0.25, 0.25, 0.25, 0.25, 1}, 8)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("P(index 4) = %.2f\n", w.Prob(4))
	for r := range 2 {
		d := sampler.Distributed{N: 5, Rank: r, World: 2, Seed: 42, Shuffle: true, Weights: w}
		ep := d.Epoch(0)
		fmt.Println("rank", r, ep.Fill(make([]int64, ep.Len()), 0))
	}
	_, err = sampler.NewWeights([]float64{1, -1}, 0)
	fmt.Println(err)
	// Output:
	// P(index 4) = 0.50
	// rank 0 [0 0 2 4]
	// rank 1 [4 4 1 0]
	// sampler: invalid weights: weight 1 is -1, want a finite number ≥ 0
}
