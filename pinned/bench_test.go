package pinned

import (
	"context"
	"fmt"
	"testing"
)

func benchLeaseRelease(b *testing.B, slots, goroutines int) {
	p := newPool(b, Config{SlotSize: 1, Slots: slots, NoLock: true})
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism(goroutines)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			s, err := p.Lease(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			if err := s.Release(); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "leases/s")
}

func BenchmarkLeaseRelease(b *testing.B) {
	for _, c := range []struct{ slots, g int }{{8, 1}, {8, 4}, {2, 8}} {
		b.Run(fmt.Sprintf("slots=%d/goroutines=%dxGOMAXPROCS", c.slots, c.g), func(b *testing.B) {
			benchLeaseRelease(b, c.slots, c.g)
		})
	}
}
