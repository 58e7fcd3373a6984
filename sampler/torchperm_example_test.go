package sampler_test

import (
	"fmt"

	"github.com/loaderd/loaderd/sampler"
)

// TorchRandperm is torch.randperm under a seeded torch.Generator:
//
//	g = torch.Generator(); g.manual_seed(42)
//	torch.randperm(10, generator=g).tolist()  # [2, 6, 1, 8, 4, 5, 0, 9, 3, 7]
func ExampleTorchRandperm() {
	fmt.Println(sampler.TorchRandperm(10, 42))
	// Output:
	// [2 6 1 8 4 5 0 9 3 7]
}

// With Order Torch, rank r's epoch e is what PyTorch's
// DistributedSampler(dataset, num_replicas=3, rank=r, shuffle=True,
// seed=42) yields after set_epoch(e): torch.randperm(10) seeded with
// 42+e, padded to 12 with its first two entries, every third entry from r.
func ExampleDistributed_torch() {
	for r := range 3 {
		d := sampler.Distributed{N: 10, Rank: r, World: 3, Seed: 42, Shuffle: true, Order: sampler.Torch}
		ep := d.Epoch(1)
		fmt.Println("rank", r, ep.Fill(make([]int64, ep.Len()), 0))
	}
	// Output:
	// rank 0 [8 0 6 3]
	// rank 1 [4 5 7 8]
	// rank 2 [9 1 2 4]
}
