package augment

import (
	"math"
	"sync"
	"testing"

	"github.com/loaderd/loaderd/client/sample"
)

// chiSquare is Σ (observed − expected)² / expected over equally likely
// cells.
func chiSquare(counts []int, total int) float64 {
	e := float64(total) / float64(len(counts))
	var x float64
	for _, c := range counts {
		x += (float64(c) - e) * (float64(c) - e) / e
	}
	return x
}

// TestPhotoDrawDeterministic: the draws are a function of (seed, epoch,
// index) alone, whatever the order or goroutine that asks.
func TestPhotoDrawDeterministic(t *testing.T) {
	for _, c := range photoChains {
		p := newChain(t, c.in, c.ops)
		h, w := 45, 57
		if !p.Variable() {
			h, w = c.in.H, c.in.W
		}
		const n = 200
		fwd := make([]sample.Params, n)
		for i := range n {
			fwd[i] = p.DrawSized(9, 3, int64(i), h, w)
		}
		var wg sync.WaitGroup
		rev := make([]sample.Params, n)
		for g := range 4 {
			wg.Go(func() {
				for i := n - 1 - g; i >= 0; i -= 4 {
					rev[i] = p.DrawSized(9, 3, int64(i), h, w)
				}
			})
		}
		wg.Wait()
		same := 0
		for i := range n {
			if fwd[i] != rev[i] {
				t.Fatalf("%s index %d: %+v, then %+v", c.ops, i, fwd[i], rev[i])
			}
			if i > 0 && fwd[i].Photo == fwd[i-1].Photo && fwd[i].Erase == fwd[i-1].Erase {
				same++
			}
		}
		if same > n/4 {
			t.Errorf("%s: %d of %d neighbours drew the same photometric params", c.ops, same, n)
		}
		if q := p.DrawSized(10, 3, 0, h, w); q == fwd[0] {
			t.Errorf("%s: seeds 9 and 10 draw the same params", c.ops)
		}
	}
}

// TestJitterDraws: the order is each of the 24 permutations about equally
// often, and each factor lies in its range.
func TestJitterDraws(t *testing.T) {
	p := newChain(t, cifarSpec, "color_jitter=0.4:0.2-0.3:0:0.5")
	const n = 24 * 500
	perms := map[[4]uint8]int{}
	var lo, hi [4]float32 = [4]float32{2, 2, 2, 2}, [4]float32{-2, -2, -2, -2}
	for i := range n {
		ph := p.Draw(1, 0, int64(i)).Photo
		perms[ph.JitterOrder]++
		for k, f := range ph.Jitter {
			lo[k], hi[k] = min(lo[k], f), max(hi[k], f)
		}
	}
	if len(perms) != 24 {
		t.Fatalf("%d distinct orders, want 24", len(perms))
	}
	counts := make([]int, 0, 24)
	for perm, c := range perms {
		var seen [4]bool
		for _, k := range perm {
			seen[k] = true
		}
		if seen != [4]bool{true, true, true, true} {
			t.Fatalf("order %v is not a permutation", perm)
		}
		counts = append(counts, c)
	}
	if x := chiSquare(counts, n); x > 60 { // 23 degrees of freedom: p < 1e-4
		t.Errorf("jitter orders: χ² = %.1f over 24 permutations", x)
	}
	want := [4][2]float32{{0.6, 1.4}, {0.2, 0.3}, {0, 0}, {-0.5, 0.5}}
	for k, r := range want {
		if lo[k] < r[0] || hi[k] > r[1] || (r[1] > r[0] && hi[k]-lo[k] < 0.95*(r[1]-r[0])) {
			t.Errorf("factor %d spans %v..%v, want about %v", k, lo[k], hi[k], r)
		}
	}
}

// TestEraseDraws: erasing happens with probability p, its box lies inside
// the image, strictly smaller than it, with an area and aspect ratio in
// range up to the rounding of the sides.
func TestEraseDraws(t *testing.T) {
	p := newChain(t, cifarSpec, "normalize=cifar10,random_erasing=0.4:0.05-0.3:0.5-2")
	const n = 5000
	applied := 0
	for i := range n {
		er := p.Draw(2, 1, int64(i)).Erase
		if !er.Applied {
			continue
		}
		applied++
		b := er.Box
		if b.X < 0 || b.Y < 0 || b.X+b.W > 32 || b.Y+b.H > 32 || b.W >= 32 || b.H >= 32 {
			t.Fatalf("box %+v outside the 32x32 image", b)
		}
		h, w := float64(b.H), float64(b.W)
		if (h+0.5)*(w+0.5) < 0.05*1024 || (h-0.5)*(w-0.5) > 0.3*1024 {
			t.Fatalf("box %+v: area %v outside 5%%-30%% of 1024", b, h*w)
		}
		if (h+0.5)/(w-0.5) < 0.5 || (h-0.5)/(w+0.5) > 2 {
			t.Fatalf("box %+v: ratio h/w %v outside 0.5-2", b, h/w)
		}
	}
	if f := float64(applied) / n; math.Abs(f-0.4) > 4*math.Sqrt(0.4*0.6/n) {
		t.Errorf("erased %.3f of samples, want 0.4", f)
	}
	// A scale no box smaller than the image reaches: ten misses, nothing
	// erased.
	p = newChain(t, cifarSpec, "normalize=cifar10,random_erasing=1:0.99-1:1-1")
	for i := range 100 {
		if er := p.Draw(2, 1, int64(i)).Erase; er != (sample.Erase{}) {
			t.Fatalf("erased %+v with scale 0.99-1", er)
		}
	}
}

// TestAutoAugmentDraws: sub-policies are equally likely, each operation
// applies with its probability, and magnitudes are the policy's bins.
func TestAutoAugmentDraws(t *testing.T) {
	m := newMagnitudes(spaceAuto, 10, 32, 32)
	for pol, subs := range policies {
		const per = 300
		n := per * len(subs)
		counts := make([]int, len(subs))
		var applied, expect float64
		for i := range n {
			var ph sample.Photo
			key := drawKey(4, 0, int64(i))
			id := drawAuto(&ph, key, subs, m)
			counts[id]++
			k := 0
			for j, st := range subs[id] {
				expect += st.p
				if unitAt(key, streamPolicyProb, uint64(j)) > float64(float32(st.p)) {
					continue
				}
				applied++
				got := ph.Ops[k]
				k++
				want := float32(0)
				if st.bin >= 0 {
					want = m[st.op][st.bin]
				}
				if got.Op != st.op || float32(math.Abs(float64(got.Magnitude))) != want || (!signed(st.op) && got.Magnitude < 0) {
					t.Fatalf("policy %d sub-policy %d step %d: drew %+v, want %v at ±%v", pol, id, j, got, st.op, want)
				}
			}
			if int(ph.NumOps) != k {
				t.Fatalf("policy %d: %d ops recorded, %d applied", pol, ph.NumOps, k)
			}
		}
		if x := chiSquare(counts, n); x > 60 { // 24 degrees of freedom
			t.Errorf("policy %d: χ² = %.1f over %d sub-policies", pol, x, len(subs))
		}
		if math.Abs(applied-expect) > 4*math.Sqrt(float64(n)) {
			t.Errorf("policy %d: %v operations applied, expected %.0f", pol, applied, expect)
		}
	}
}

// TestRandTrivialDraws: operations are uniform over the 14, magnitudes
// are bin M (RandAugment) or a uniform bin (TrivialAugmentWide), signed
// operations take either sign about equally.
func TestRandTrivialDraws(t *testing.T) {
	ra := newChain(t, cifarSpec, "rand_augment=3:7:11")
	ta := newChain(t, cifarSpec, "trivial_augment_wide=5")
	mRA := newMagnitudes(spaceAuto, 11, 32, 32)
	mTA := newMagnitudes(spaceWide, 5, 32, 32)
	const n = 4200
	ops := [2][]int{make([]int, sample.NumAugOps), make([]int, sample.NumAugOps)}
	neg, sgn, bins := 0, 0, make([]int, 5)
	for i := range n {
		a := ra.Draw(5, 0, int64(i)).Photo
		if a.NumOps != 3 {
			t.Fatalf("rand_augment=3 drew %d ops", a.NumOps)
		}
		for _, po := range a.Ops[:3] {
			ops[0][po.Op]++
			want := mRA.at(po.Op, 7)
			if float32(math.Abs(float64(po.Magnitude))) != want {
				t.Fatalf("rand_augment: %+v, want magnitude ±%v", po, want)
			}
			if signed(po.Op) {
				sgn++
				if math.Signbit(float64(po.Magnitude)) {
					neg++
				}
			}
		}
		b := ta.Draw(5, 0, int64(i)).Photo
		po := b.Ops[0]
		ops[1][po.Op]++
		if b.NumOps != 1 {
			t.Fatalf("trivial_augment_wide drew %d ops", b.NumOps)
		}
		if t := mTA[po.Op]; t != nil {
			for k, v := range t {
				if v == float32(math.Abs(float64(po.Magnitude))) {
					bins[k]++
					break
				}
			}
		}
	}
	for f, c := range ops {
		if c[sample.OpInvert] != 0 {
			t.Errorf("family %d drew Invert", f)
		}
		if x := chiSquare(c[:sample.OpInvert], [2]int{3 * n, n}[f]); x > 45 { // 13 degrees of freedom
			t.Errorf("family %d: χ² = %.1f over 14 operations: %v", f, x, c)
		}
	}
	if math.Abs(float64(neg)/float64(sgn)-0.5) > 4*math.Sqrt(0.25/float64(sgn)) {
		t.Errorf("%d of %d signed magnitudes negative", neg, sgn)
	}
	total := 0
	for _, c := range bins {
		total += c
	}
	// Bins may share a value (posterize's), which counts for the first.
	if x := chiSquare(bins, total); x > 40 {
		t.Errorf("trivial_augment_wide bins %v: χ² = %.1f", bins, x)
	}
}

// TestMagnitudeTables spells out a few of torchvision's bins.
func TestMagnitudeTables(t *testing.T) {
	a := newMagnitudes(spaceAuto, 10, 32, 40)
	w := newMagnitudes(spaceWide, 31, 32, 40)
	for _, tc := range []struct {
		got, want []float32
	}{
		{a[pos], []float32{8, 8, 7, 7, 6, 6, 5, 5, 4, 4}},
		{w[pos][:8], []float32{8, 8, 8, 7, 7, 7, 7, 7}},
		{w[pos][28:], []float32{2, 2, 2}},
		{a[sol][:2], []float32{255, 226.66667}},
		{a[rot][9:], []float32{30}},
		{a[trX][9:], []float32{float32(150.0 / 331.0 * 40)}},
		{a[trY][9:], []float32{float32(150.0 / 331.0 * 32)}},
		{w[trX][:2], []float32{0, 32.0 / 30}},
		{w[shX][30:], []float32{0.99}},
	} {
		if len(tc.got) != len(tc.want) {
			t.Fatalf("%v, want %v", tc.got, tc.want)
		}
		for i := range tc.got {
			if tc.got[i] != tc.want[i] {
				t.Errorf("%v, want %v", tc.got, tc.want)
				break
			}
		}
	}
	for op := range sample.NumAugOps {
		if (a[op] == nil) != (op == sample.OpIdentity || op >= aut) {
			t.Errorf("%v: bins %v", op, a[op])
		}
	}
}
