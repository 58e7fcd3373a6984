package sampler_test

import (
	"fmt"

	"github.com/loaderd/loaderd/sampler"
)

// Ten samples over four ranks without shuffling: the list is padded to 12
// by wrapping, so ranks 2 and 3 see indices 0 and 1 a second time.
func ExampleDistributed() {
	for r := range 4 {
		d := sampler.Distributed{N: 10, Rank: r, World: 4}
		ep := d.Epoch(0)
		fmt.Println("rank", r, ep.Fill(make([]int64, ep.Len()), 0))
	}
	// Output:
	// rank 0 [0 4 8]
	// rank 1 [1 5 9]
	// rank 2 [2 6 0]
	// rank 3 [3 7 1]
}

// A shuffled epoch is a pure function of (seed, epoch, rank, world).
func ExampleDistributed_Epoch() {
	for e := range int64(2) {
		for r := range 2 {
			d := sampler.Distributed{N: 10, Rank: r, World: 2, Seed: 42, Shuffle: true}
			ep := d.Epoch(e)
			fmt.Println("epoch", e, "rank", r, ep.Fill(make([]int64, ep.Len()), 0))
		}
	}
	// Output:
	// epoch 0 rank 0 [9 1 8 2 7]
	// epoch 0 rank 1 [3 5 6 4 0]
	// epoch 1 rank 0 [9 2 3 6 4]
	// epoch 1 rank 1 [7 1 0 8 5]
}

func ExamplePerm() {
	p := sampler.NewPerm(8, 7)
	order := make([]int64, p.Len())
	for i := range order {
		order[i] = p.At(int64(i))
	}
	fmt.Println(order)
	fmt.Println(p.Inverse(order[5]), p.At(8))
	// Output:
	// [0 2 6 7 1 4 3 5]
	// 5 -1
}

// Resuming at a recorded position continues the uninterrupted sequence.
func ExampleCursor() {
	d := sampler.Distributed{N: 10, Rank: 1, World: 2, Seed: 3, Shuffle: true}
	c, err := sampler.NewCursor(d, 2, false, sampler.Position{})
	if err != nil {
		fmt.Println(err)
		return
	}
	c.SetEpochs(2)
	buf := make([]int64, 2)
	for range 4 {
		pos, idx, _ := c.Next(buf)
		fmt.Println(pos, idx)
	}
	resume := c.Pos()
	fmt.Println("resume at", resume)

	r, _ := sampler.NewCursor(d, 2, false, resume)
	r.SetEpochs(2)
	for {
		pos, idx, ok := r.Next(buf)
		if !ok {
			break
		}
		fmt.Println(pos, idx)
	}
	// Output:
	// epoch 0 batch 0 [4 0]
	// epoch 0 batch 1 [2 7]
	// epoch 0 batch 2 [8]
	// epoch 1 batch 0 [4 1]
	// resume at epoch 1 batch 1
	// epoch 1 batch 1 [8 9]
	// epoch 1 batch 2 [0]
}

func ExampleNewCursor_error() {
	_, err := sampler.NewCursor(sampler.Distributed{N: 10, Rank: 2, World: 2}, 0, false, sampler.Position{})
	fmt.Println(err)
	// Output:
	// sampler: rank out of range: rank=2, world=2
	// sampler: batch size below 1: 0
}

// Elastic resume: four ranks checkpoint after one batch of 2 each, having
// consumed entries 0..7 of the order; three ranks finish the epoch from
// there, the list padded from the order's start (index 0 again).
func ExampleDistributed_Global() {
	old := sampler.Distributed{N: 10, World: 4}
	g, err := old.Global(sampler.Position{Epoch: 0, Batch: 1}, 2, false)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("resume at", g)
	for r := range 3 {
		ep := sampler.Distributed{N: 10, Rank: r, World: 3}.EpochFrom(g.Epoch, g.Offset)
		fmt.Println("rank", r, ep.Fill(make([]int64, ep.Len()), 0))
	}
	// Output:
	// resume at epoch 0 batch 0 after offset 8
	// rank 0 [8]
	// rank 1 [9]
	// rank 2 [0]
}
