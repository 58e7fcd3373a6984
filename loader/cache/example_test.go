package cache_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/cache"
)

// Example runs four streams with different seeds over one cached dataset:
// each sample is read from the source once, by whichever stream needs it
// first, and from the cache by every other.
func Example() {
	src, err := cache.Open("synthetic:1000?cache=decoded&cache_bytes=3MiB")
	if err != nil {
		panic(err)
	}
	defer src.Close()
	pipe, err := augment.NewPipeline(src.Spec(), augment.CIFARTrain(sample.F32, sample.CHW)...)
	if err != nil {
		panic(err)
	}
	pool := loader.NewPool(2)
	defer pool.Close()
	var wg sync.WaitGroup
	for seed := range uint64(4) {
		l, err := loader.New(pool, loader.Config{Source: src, Pipeline: pipe, World: 1, Seed: seed,
			Shuffle: true, BatchSize: 100, Epochs: 2})
		if err != nil {
			panic(err)
		}
		wg.Go(func() {
			defer l.Close()
			for {
				b, err := l.Next(context.Background())
				if err != nil {
					return
				}
				b.Release()
			}
		})
	}
	wg.Wait()
	s := src.(*cache.Cache).Stats()
	fmt.Printf("%d reads, %d entries of %d, %d bytes of %d\n", s.Hits+s.Misses, s.Entries, s.Len, s.Bytes, s.Capacity)
	// Two workers may both read a sample that two streams need at once.
	fmt.Println("each sample read from the source about once:", s.Misses < 1100)
	// Output:
	// 8000 reads, 1000 entries of 1000, 3072000 bytes of 3072000
	// each sample read from the source about once: true
}
