package sampler

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

// segment is one world's part of an epoch: World ranks taking batches of
// BS each; Stop batches per rank before the next world takes over (-1:
// to the end of the epoch).
type segment struct {
	World, BS int
	Stop      int64
}

// restRef materialises the list the ranks of a world share for the rest of
// an epoch from global offset g, as docs/RESUME.md defines it: order[g:],
// padded from the start of the order (wrapping as often as needed) or cut
// to a multiple of the world.
func restRef(order []int64, g int64, world int, dropLast bool) []int64 {
	n, w := int64(len(order)), int64(world)
	r := n - g
	total := (r + w - 1) / w * w
	if dropLast {
		total = r / w * w
	}
	out := make([]int64, 0, total)
	for j := range total {
		out = append(out, order[(g+j)%n])
	}
	return out
}

// refRun is the reference for a chain of segments over epoch e: the
// indices each segment's ranks take, from materialised lists.
func refRun(order []int64, segs []segment, dropLast, dlb bool) (got []int64) {
	g := int64(0)
	for i, s := range segs {
		list := restRef(order, g, s.World, dropLast)
		per := int64(len(list) / s.World) // positions per rank
		full := per
		if dlb {
			full = per / int64(s.BS) * int64(s.BS)
		}
		take := full
		if i < len(segs)-1 && s.Stop >= 0 {
			take = min(full, s.Stop*int64(s.BS))
		}
		got = append(got, list[:take*int64(s.World)]...)
		g += take * int64(s.World)
		if take == full || g >= int64(len(order)) {
			return got
		}
	}
	return got
}

// runSegments walks the chain with Cursors, one per rank, checkpointing
// every rank after Stop batches and resuming the next world at Agree's
// global position. It returns every index taken in epoch e, the global
// positions resumed at, and the position each rank reached at the end.
func runSegments(t *testing.T, base Distributed, e int64, segs []segment, dlb bool) ([]int64, []Position) {
	t.Helper()
	pos := Position{Epoch: e}
	var got []int64
	var resumes []Position
	for i, s := range segs {
		d := base
		d.World = s.World
		var ends []Position
		var lists [][]int64
		for r := range s.World {
			d.Rank = r
			c, err := NewCursor(d, s.BS, dlb, pos)
			if err != nil {
				t.Fatalf("segment %d rank %d at %v: %v", i, r, pos, err)
			}
			var mine []int64
			for k := int64(0); i == len(segs)-1 || s.Stop < 0 || k < s.Stop; k++ {
				p, idx, ok := c.Next(nil)
				if !ok || p.Epoch != e {
					break
				}
				if p.Offset != pos.Offset {
					t.Fatalf("segment %d rank %d: batch at %v, started at %v", i, r, p, pos)
				}
				mine = append(mine, idx...)
				if c.Pos().Epoch != e {
					break
				}
			}
			lists = append(lists, mine)
			ends = append(ends, c.Pos())
		}
		// Interleave the ranks' lists back into global order: rank r's
		// j-th sample is list position r + j·World.
		for j := 0; ; j++ {
			n := 0
			for r := range s.World {
				if j < len(lists[r]) {
					got = append(got, lists[r][j])
					n++
				}
			}
			if n == 0 {
				break
			}
		}
		d.Rank = 0
		g, err := d.Agree(ends, s.BS, dlb)
		if err != nil {
			t.Fatalf("segment %d: %v", i, err)
		}
		if g.Epoch != e {
			break
		}
		if g.Batch != 0 || g.Offset <= pos.Offset && s.Stop > 0 {
			t.Fatalf("segment %d from %v: global position %v", i, pos, g)
		}
		resumes = append(resumes, g)
		pos = g
	}
	return got, resumes
}

var elasticChains = [][]int{{4, 2}, {2, 3}, {3, 1}, {1, 4}, {4, 2, 3}, {1, 4, 3, 2}, {3, 3}}

// TestElasticResume covers W → W′ for 4→2, 2→3, 3→1, 1→4 and chains of
// resumes, with and without the sampler's drop_last and the short last
// batch dropped, for dataset sizes that divide and do not, and checkpoints
// at the start, mid-epoch, before the last batch and at the epoch's end:
// the indices the ranks take over the epoch are the reference's, in the
// same global order; without drop_last every index comes at least once and
// the only repeats are the padding (the first entries of the order),
// with drop_last none repeats and only a tail of the order is missing.
func TestElasticResume(t *testing.T) {
	for _, n := range []int64{5, 24, 37, 48} {
		for _, chain := range elasticChains {
			for _, dropLast := range []bool{false, true} {
				for _, dlb := range []bool{false, true} {
					for _, bs := range []int{1, 3} {
						base := Distributed{N: n, Seed: 3, Shuffle: n != 24, DropLast: dropLast}
						elasticCase(t, base, chain, bs, dlb)
					}
				}
			}
		}
	}
}

func elasticCase(t *testing.T, base Distributed, chain []int, bs int, dlb bool) {
	const e = 2
	order := epochOrder(base, e)
	d0 := base
	d0.World = chain[0]
	first := d0.BatchesFrom(0, bs, dlb)
	for i, w := range chain {
		d := base
		d.World = w
		if d.BatchesFrom(0, bs+i%2, dlb) == 0 {
			return // NewCursor refuses a world with no batch in an epoch
		}
	}
	stops := []int64{0, 1, first / 2, first - 1, first}
	for _, stop := range stops {
		if stop < 0 {
			continue
		}
		segs := make([]segment, len(chain))
		for i, w := range chain {
			// Later stops vary too: one batch in, or none.
			segs[i] = segment{World: w, BS: bs + i%2, Stop: max(stop-int64(i), 1)}
		}
		segs[0].Stop = stop
		name := fmt.Sprintf("N=%d chain=%v bs=%d droplast=%t dlb=%t stop=%d", base.N, chain, bs, base.DropLast, dlb, stop)
		got, resumes := runSegments(t, base, e, segs, dlb)
		want := refRun(order, segs, base.DropLast, dlb)
		if !slices.Equal(got, want) {
			t.Fatalf("%s (resumed at %v):\n got %v\nwant %v", name, resumes, got, want)
		}
		counts := make(map[int64]int)
		for _, i := range got {
			counts[i]++
		}
		last := chain[len(resumes)] // the world that ended the epoch
		lastBS := bs + len(resumes)%2
		switch {
		case !base.DropLast && !dlb:
			for _, i := range order {
				if counts[i] == 0 {
					t.Fatalf("%s: index %d never delivered", name, i)
				}
			}
			extra := int64(len(got)) - base.N
			if extra < 0 || extra >= int64(last) && base.N >= int64(last) {
				t.Fatalf("%s: %d repeats, last world %d", name, extra, last)
			}
			// The repeats are the first entries of the order.
			for k := range extra {
				if i := order[k%base.N]; counts[i] < 2 {
					t.Fatalf("%s: padding entry %d (index %d) not repeated", name, k, i)
				}
			}
		case base.DropLast && !dlb:
			missing := base.N - int64(len(got))
			if missing < 0 || missing >= int64(last) {
				t.Fatalf("%s: %d dropped, last world %d", name, missing, last)
			}
			if !slices.Equal(got, order[:len(got)]) {
				t.Fatalf("%s: not a prefix of the order, once each", name)
			}
		default: // a short batch dropped too: still no repeat beyond the padding
			if len(got) > int(base.N)+last && base.N >= int64(last) || len(got) < int(base.N)-last*lastBS {
				t.Fatalf("%s: %d delivered of %d", name, len(got), base.N)
			}
		}
	}
}

// TestSameWorldResumeIsExact: the global position is a canonical resume
// point. A world resumed at Global(p) under its own batch size receives
// exactly what the cursor at p would have, padding and the short last
// batch included, and the epochs after it.
func TestSameWorldResumeIsExact(t *testing.T) {
	forConfigs(func(d Distributed) {
		if d.N > 64 || d.World > 8 {
			return
		}
		for _, bs := range []int{1, 4} {
			for _, dlb := range []bool{false, true} {
				per := d.BatchesFrom(0, bs, dlb)
				if per == 0 {
					continue
				}
				for k := range per + 1 {
					p := Position{Epoch: 1, Batch: k}
					g, err := d.Global(p, bs, dlb)
					if err != nil {
						t.Fatal(err)
					}
					for r := range d.World {
						d.Rank = r
						a, _ := NewCursor(d, bs, dlb, p)
						b, _ := NewCursor(d, bs, dlb, g)
						a.SetEpochs(3)
						b.SetEpochs(3)
						sa, sb := walk(t, a, 1000), walk(t, b, 1000)
						if len(sa) != len(sb) {
							t.Fatalf("%+v bs=%d dlb=%t from %v / %v: %d and %d batches", d, bs, dlb, p, g, len(sa), len(sb))
						}
						for i := range sa {
							if !slices.Equal(sa[i].idx, sb[i].idx) || sa[i].pos.Epoch != sb[i].pos.Epoch {
								t.Fatalf("%+v bs=%d dlb=%t from %v / %v: batch %d: %v, %v", d, bs, dlb, p, g, i, sa[i], sb[i])
							}
						}
					}
				}
			}
		}
	})
}

// TestEpochAfterResumeIsOrdinary: once the resumed epoch ends, the new
// world's cursor continues exactly as an ordinary run of that world.
func TestEpochAfterResumeIsOrdinary(t *testing.T) {
	d := Distributed{N: 37, World: 3, Rank: 1, Seed: 5, Shuffle: true}
	c, err := NewCursor(d, 4, false, Position{Epoch: 1, Offset: 11})
	if err != nil {
		t.Fatal(err)
	}
	c.SetEpochs(4)
	steps := walk(t, c, 100)
	o, _ := NewCursor(d, 4, false, Position{Epoch: 2})
	o.SetEpochs(4)
	ordinary := walk(t, o, 100)
	per := d.BatchesFrom(11, 4, false)
	if int64(len(steps)) != per+int64(len(ordinary)) || !slices.EqualFunc(steps[per:], ordinary, stepEqual) {
		t.Fatalf("after the resumed epoch (%d batches): %v\nwant %v", per, steps[per:], ordinary)
	}
	if steps[per-1].pos != (Position{Epoch: 1, Batch: per - 1, Offset: 11}) {
		t.Errorf("last batch of the resumed epoch at %v", steps[per-1].pos)
	}
}

// TestGlobalEdges: offsets at 0, at N and in the padding; positions out of
// range; disagreeing ranks.
func TestGlobalEdges(t *testing.T) {
	d := Distributed{N: 10, World: 4, Seed: 1, Shuffle: true} // 3 per rank, 2 of padding
	cases := []struct {
		p    Position
		bs   int
		want Position
		err  error
	}{
		{Position{Epoch: 2}, 1, Position{Epoch: 2}, nil},
		{Position{Epoch: 2, Batch: 1}, 1, Position{Epoch: 2, Offset: 4}, nil},
		{Position{Epoch: 2, Batch: 2}, 1, Position{Epoch: 2, Offset: 8}, nil},
		{Position{Epoch: 2, Batch: 3}, 1, Position{Epoch: 3}, nil}, // the padding is all that is left
		{Position{Epoch: 2, Batch: 1, Offset: 8}, 1, Position{Epoch: 3}, nil},
		{Position{Epoch: 2, Offset: 10}, 1, Position{Epoch: 3}, nil}, // offset N: done
		{Position{Epoch: 2, Batch: 1}, 2, Position{Epoch: 2, Offset: 8}, nil},
		{Position{Epoch: 2, Batch: 2}, 2, Position{Epoch: 3}, nil},
		{Position{Epoch: 2, Batch: 4}, 1, Position{}, ErrPosition},
		{Position{Epoch: 2, Offset: 11}, 1, Position{}, ErrPosition},
		{Position{Epoch: -1}, 1, Position{}, ErrPosition},
		{Position{Epoch: 2}, 0, Position{}, ErrBatchSize},
	}
	for _, c := range cases {
		got, err := d.Global(c.p, c.bs, false)
		if got != c.want || !errors.Is(err, c.err) || (err == nil) != (c.err == nil) {
			t.Errorf("Global(%v, bs %d) = %v, %v; want %v, %v", c.p, c.bs, got, err, c.want, c.err)
		}
	}
	// An offset in [0, N] seeks; the empty rest starts the next epoch.
	c, err := NewCursor(d, 1, false, Position{Epoch: 2, Offset: 10})
	if err != nil || c.Pos() != (Position{Epoch: 3}) {
		t.Errorf("cursor at offset N: %v, %v", c, err)
	}
	if _, err := NewCursor(d, 1, false, Position{Epoch: 2, Offset: 11}); !errors.Is(err, ErrPosition) {
		t.Errorf("cursor past N: %v", err)
	}
	// DropLast with fewer entries left than ranks: the rest is all dropped.
	dd := Distributed{N: 10, World: 4, DropLast: true}
	if g, err := dd.Global(Position{Epoch: 0, Batch: 2}, 1, false); err != nil || g != (Position{Epoch: 1}) {
		t.Errorf("drop last: %v, %v", g, err)
	}
	if g, _ := dd.Global(Position{Epoch: 0, Batch: 1}, 1, false); g != (Position{Epoch: 0, Offset: 4}) {
		t.Errorf("drop last mid-epoch: %v", g)
	}
	// Ranks must agree.
	if g, err := d.Agree([]Position{{Epoch: 1, Batch: 1}, {Epoch: 1, Batch: 1}, {Epoch: 1, Batch: 1}, {Epoch: 1, Batch: 1}}, 1, false); err != nil || g != (Position{Epoch: 1, Offset: 4}) {
		t.Errorf("agreeing ranks: %v, %v", g, err)
	}
	_, err = d.Agree([]Position{{Epoch: 1, Batch: 1}, {Epoch: 1, Batch: 2}, {Epoch: 1, Batch: 1}, {Epoch: 1, Batch: 1}}, 1, false)
	if !errors.Is(err, ErrDisagree) {
		t.Errorf("disagreeing ranks: %v", err)
	}
	if _, err := d.Agree([]Position{{Epoch: 1}}, 1, false); !errors.Is(err, ErrDisagree) {
		t.Errorf("one position for four ranks: %v", err)
	}
}

func TestEpochFromAllocs(t *testing.T) {
	d := Distributed{N: 1000, World: 3, Rank: 2, Seed: 8, Shuffle: true}
	ep := d.EpochFrom(1, 517)
	buf := make([]int64, 64)
	if n := testing.AllocsPerRun(100, func() { ep.Fill(buf, 3) }); n != 0 {
		t.Errorf("Fill allocates %.1f", n)
	}
	// Fill agrees with At, past the wrap into the padding.
	got := ep.Fill(make([]int64, ep.Len()), 0)
	for p := range ep.Len() {
		if got[p] != ep.At(p) {
			t.Fatalf("Fill[%d] = %d, At = %d", p, got[p], ep.At(p))
		}
	}
}
