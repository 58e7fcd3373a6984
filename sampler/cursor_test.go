package sampler

import (
	"errors"
	"slices"
	"testing"
)

func TestBatches(t *testing.T) {
	cases := []struct {
		n    int64
		bs   int
		drop bool
		want int64
	}{
		{10, 3, false, 4},
		{10, 3, true, 3},
		{9, 3, false, 3},
		{9, 3, true, 3},
		{2, 3, false, 1},
		{2, 3, true, 0},
		{0, 3, false, 0},
		{5, 0, false, 0},
		{-5, 2, false, 0},
		{125_000_000, 256, false, 488282},
	}
	for _, c := range cases {
		if got := Batches(c.n, c.bs, c.drop); got != c.want {
			t.Errorf("Batches(%d, %d, %t) = %d, want %d", c.n, c.bs, c.drop, got, c.want)
		}
	}
}

func TestPositionArithmetic(t *testing.T) {
	const per = 3
	p := Position{}
	for seq := range int64(10) {
		if p.Seq(per) != seq || PositionAt(seq, per) != p {
			t.Fatalf("seq %d: position %v, Seq %d, PositionAt %v", seq, p, p.Seq(per), PositionAt(seq, per))
		}
		p = p.Next(per)
	}
	if p != (Position{Epoch: 3, Batch: 1}) {
		t.Errorf("after 10 batches: %v", p)
	}
}

type step struct {
	pos Position
	idx []int64
}

// walk collects the batches a cursor produces, copying each.
func walk(t *testing.T, c *Cursor, limit int) []step {
	t.Helper()
	var out []step
	buf := make([]int64, 0, 64)
	for range limit {
		pos, idx, ok := c.Next(buf)
		if !ok {
			return out
		}
		out = append(out, step{pos, slices.Clone(idx)})
	}
	t.Fatal("cursor did not stop")
	return nil
}

var cursorCases = []struct {
	d        Distributed
	bs       int
	dropLast bool
}{
	{Distributed{N: 10, World: 4, Rank: 2, Seed: 1, Shuffle: true}, 2, false},
	{Distributed{N: 10, World: 4, Rank: 2, Seed: 1, Shuffle: true}, 2, true},
	{Distributed{N: 103, World: 3, Rank: 0, Seed: 9, Shuffle: true, DropLast: true}, 8, false},
	{Distributed{N: 103, World: 3, Rank: 1, Seed: 9, Shuffle: true}, 8, true},
	{Distributed{N: 7, World: 1, Seed: 2}, 7, false},
	{Distributed{N: 1, World: 1, Seed: 2, Shuffle: true}, 4, false},
	{Distributed{N: 3, World: 8, Rank: 7, Seed: 2, Shuffle: true}, 1, false},
	{Distributed{N: 103, World: 3, Rank: 1, Seed: 9, Shuffle: true, Order: Torch}, 8, false},
	{Distributed{N: 3, World: 8, Rank: 6, Seed: 1 << 40, Shuffle: true, Order: Torch}, 1, false},
}

// TestCursorWalk checks that a walk from {0, 0} visits every batch of each
// epoch in order, and that the batches concatenate to the rank's epoch.
func TestCursorWalk(t *testing.T) {
	const epochs = 3
	for _, cc := range cursorCases {
		c, err := NewCursor(cc.d, cc.bs, cc.dropLast, Position{})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.SetEpochs(epochs); err != nil {
			t.Fatal(err)
		}
		steps := walk(t, c, 1000)
		per := Batches(cc.d.NumSamples(), cc.bs, cc.dropLast)
		if int64(len(steps)) != epochs*per || c.PerEpoch() != per {
			t.Fatalf("%+v: %d batches, want %d×%d", cc, len(steps), epochs, per)
		}
		for e := range int64(epochs) {
			var got []int64
			for b, s := range steps[e*per : (e+1)*per] {
				if s.pos != (Position{Epoch: e, Batch: int64(b)}) {
					t.Fatalf("%+v: batch at %v, want epoch %d batch %d", cc, s.pos, e, b)
				}
				if len(s.idx) > cc.bs || (cc.dropLast && len(s.idx) != cc.bs) {
					t.Fatalf("%+v %v: batch of %d", cc, s.pos, len(s.idx))
				}
				got = append(got, s.idx...)
			}
			ep := cc.d.Epoch(e)
			var want []int64
			for p := range ep.Len() {
				want = append(want, ep.At(p))
			}
			if cc.dropLast {
				want = want[:per*int64(cc.bs)]
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%+v epoch %d: batches give %v, want %v", cc, e, got, want)
			}
		}
		if c.Pos() != (Position{Epoch: epochs}) {
			t.Errorf("%+v: stopped at %v", cc, c.Pos())
		}
	}
}

// TestCursorResume restarts at every position of a three-epoch walk and
// checks that the rest matches the uninterrupted walk exactly.
func TestCursorResume(t *testing.T) {
	for _, cc := range cursorCases {
		c, _ := NewCursor(cc.d, cc.bs, cc.dropLast, Position{})
		c.SetEpochs(3)
		full := walk(t, c, 1000)
		for k, s := range full {
			r, err := NewCursor(cc.d, cc.bs, cc.dropLast, s.pos)
			if err != nil {
				t.Fatal(err)
			}
			r.SetEpochs(3)
			if tail := walk(t, r, 1000); !slices.EqualFunc(tail, full[k:], stepEqual) {
				t.Fatalf("%+v: resume at %v diverges", cc, s.pos)
			}
			// Seek on a used cursor must land on the same tail.
			c.Seek(s.pos)
			if tail := walk(t, c, 1000); !slices.EqualFunc(tail, full[k:], stepEqual) {
				t.Fatalf("%+v: Seek to %v diverges", cc, s.pos)
			}
		}
		// A batch index equal to the batch count means the next epoch.
		per := Batches(cc.d.NumSamples(), cc.bs, cc.dropLast)
		r, err := NewCursor(cc.d, cc.bs, cc.dropLast, Position{Epoch: 1, Batch: per})
		if err != nil {
			t.Fatal(err)
		}
		r.SetEpochs(3)
		if tail := walk(t, r, 1000); !slices.EqualFunc(tail, full[2*per:], stepEqual) {
			t.Fatalf("%+v: resume at end of epoch 1 diverges", cc)
		}
	}
}

func stepEqual(a, b step) bool { return a.pos == b.pos && slices.Equal(a.idx, b.idx) }

func TestCursorLimits(t *testing.T) {
	d := Distributed{N: 20, World: 2, Seed: 4, Shuffle: true}
	c, _ := NewCursor(d, 5, false, Position{Epoch: 1, Batch: 1})
	c.SetEpochs(2)
	if steps := walk(t, c, 100); len(steps) != 1 || steps[0].pos != (Position{Epoch: 1, Batch: 1}) {
		t.Errorf("limit 2 from epoch 1 batch 1: %v", steps)
	}
	c, _ = NewCursor(d, 5, false, Position{Epoch: 5})
	c.SetEpochs(2)
	if _, idx, ok := c.Next(nil); ok || len(idx) != 0 {
		t.Error("cursor past its limit produced a batch")
	}
	c.SetEpochs(0) // endless again
	if pos, idx, ok := c.Next(nil); !ok || pos != (Position{Epoch: 5}) || len(idx) != 5 {
		t.Errorf("endless cursor: %v %v %t", pos, idx, ok)
	}
	if err := c.SetEpochs(-1); !errors.Is(err, ErrEpochs) {
		t.Errorf("SetEpochs(-1) = %v", err)
	}
}

func TestCursorErrors(t *testing.T) {
	ok := Distributed{N: 10, World: 2}
	cases := []struct {
		name  string
		d     Distributed
		bs    int
		drop  bool
		start Position
		want  []error
	}{
		{"batch size", ok, 0, false, Position{}, []error{ErrBatchSize}},
		{"bad config and batch size", Distributed{N: 10, Rank: 2, World: 2}, -1, false, Position{}, []error{ErrRank, ErrBatchSize}},
		{"empty dataset", Distributed{World: 1}, 4, false, Position{}, []error{ErrEmptyDataset}},
		{"no samples", Distributed{N: 3, World: 4, DropLast: true}, 1, false, Position{}, []error{ErrNoBatches}},
		{"short epoch", ok, 6, true, Position{}, []error{ErrNoBatches}},
		{"negative epoch", ok, 2, false, Position{Epoch: -1}, []error{ErrPosition}},
		{"negative batch", ok, 2, false, Position{Batch: -1}, []error{ErrPosition}},
		{"batch past end", ok, 2, false, Position{Batch: 4}, []error{ErrPosition}},
	}
	for _, c := range cases {
		cur, err := NewCursor(c.d, c.bs, c.drop, c.start)
		if cur != nil || err == nil {
			t.Errorf("%s: got a cursor, err %v", c.name, err)
			continue
		}
		for _, w := range c.want {
			if !errors.Is(err, w) {
				t.Errorf("%s: %v does not wrap %v", c.name, err, w)
			}
		}
	}
}

// TestCursorAllocs walks across epoch boundaries with a reused buffer.
func TestCursorAllocs(t *testing.T) {
	d := Distributed{N: 1000, World: 3, Rank: 2, Seed: 8, Shuffle: true}
	c, _ := NewCursor(d, 64, false, Position{})
	buf := make([]int64, 64)
	if n := testing.AllocsPerRun(200, func() { c.Next(buf) }); n != 0 {
		t.Errorf("Next allocates %.1f per batch", n)
	}
	if c.Pos().Epoch < 10 {
		t.Errorf("walk did not cross epochs: at %v", c.Pos())
	}
	// A short buffer still works (and may allocate).
	_, idx, ok := c.Next(make([]int64, 1))
	if !ok || len(idx) == 0 {
		t.Error("short buffer gave no batch")
	}
}
