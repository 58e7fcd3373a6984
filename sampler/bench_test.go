package sampler

import (
	"fmt"
	"testing"
)

// benchPermAt measures one At on scattered positions of a size-n
// permutation; n = 4^k+1 is the worst case for cycle-walking.
func benchPermAt(b *testing.B, n int64) {
	p := NewPerm(n, 12345)
	b.ReportAllocs()
	var sink int64
	i := int64(0)
	for b.Loop() {
		sink += p.At(i)
		i += 0x9e3779b9
		if i >= n {
			i %= n
		}
	}
	if sink == -1 {
		b.Log(sink)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "indices/s")
}

func BenchmarkPermAt(b *testing.B) {
	b.Run("n=1e9", func(b *testing.B) { benchPermAt(b, 1e9) })
	b.Run("n=50000", func(b *testing.B) { benchPermAt(b, 50_000) })
	b.Run("n=4^10+1", func(b *testing.B) { benchPermAt(b, 1<<20+1) })
}

// benchEpochFill measures filling one batch of indices, walking the epoch.
func benchEpochFill(b *testing.B, d Distributed, bs int) {
	ep := d.Epoch(1)
	buf := make([]int64, bs)
	b.SetBytes(int64(8 * bs))
	b.ReportAllocs()
	start := int64(0)
	for b.Loop() {
		if len(ep.Fill(buf, start)) < bs {
			start = 0
			continue
		}
		start += int64(bs)
	}
	b.ReportMetric(float64(b.N)*float64(bs)/b.Elapsed().Seconds(), "indices/s")
}

func BenchmarkEpochFill(b *testing.B) {
	for _, c := range []struct {
		n     int64
		world int
		shuf  bool
	}{
		{1e9, 8, true},
		{50_000, 2, true},
		{50_000, 2, false},
	} {
		d := Distributed{N: c.n, World: c.world, Rank: c.world - 1, Seed: 1, Shuffle: c.shuf}
		b.Run(fmt.Sprintf("n=%d/world=%d/shuffle=%t/bs=256", c.n, c.world, c.shuf),
			func(b *testing.B) { benchEpochFill(b, d, 256) })
	}
}
