package sampler

import "testing"

// TestNumberingWalk checks At against a Cursor, the batches an
// uninterrupted stream delivers, for starts inside, at the end of, and
// after an elastic offset into their epoch.
func TestNumberingWalk(t *testing.T) {
	d := Distributed{N: 103, Rank: 1, World: 3, Seed: 5, Shuffle: true}
	const bs = 4
	for _, tc := range []struct {
		name  string
		start Position
		end   int64
	}{
		{"zero", Position{}, 3},
		{"mid", Position{Epoch: 2, Batch: 5}, 5},
		{"last", Position{Epoch: 1, Batch: 8}, 3},
		{"offset", Position{Epoch: 1, Batch: 2, Offset: 40}, 4},
		{"offset-spent", Position{Epoch: 1, Offset: 103}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewCursor(d, bs, false, tc.start)
			if err != nil && tc.start.Offset != d.N {
				t.Fatal(err)
			}
			if c == nil { // nothing left of the start epoch: the stream starts at the next
				if c, err = NewCursor(d, bs, false, Position{Epoch: tc.start.Epoch + 1}); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.SetEpochs(tc.end); err != nil {
				t.Fatal(err)
			}
			first := c.PerEpoch()
			if tc.start.Offset != 0 {
				first = d.BatchesFrom(tc.start.Offset, bs, false)
			}
			n := NewNumbering(tc.start, first, c.PerEpoch(), tc.end)
			var k int64
			for {
				want, _, ok := c.Next(nil)
				if !ok {
					break
				}
				got, ok := n.At(k)
				if !ok || got != want {
					t.Fatalf("At(%d) = %v, %t; the cursor's batch %d is %v", k, got, ok, k, want)
				}
				k++
			}
			if n.Len() != k {
				t.Fatalf("Len = %d, the cursor walked %d", n.Len(), k)
			}
			if p, ok := n.At(k); ok {
				t.Fatalf("At(%d), past the end, = %v", k, p)
			}
			if _, ok := n.At(-1); ok {
				t.Fatal("At(-1) is a position")
			}
		})
	}
}

func TestNumberingEndless(t *testing.T) {
	n := NewNumbering(Position{Epoch: 4, Batch: 1}, 10, 10, 0)
	if n.Len() != -1 {
		t.Fatalf("Len = %d, want -1", n.Len())
	}
	if p, ok := n.At(1e12); !ok || p != (Position{Epoch: 4 + 1e11, Batch: 1}) {
		t.Fatalf("At(1e12) = %v, %t", p, ok)
	}
}
