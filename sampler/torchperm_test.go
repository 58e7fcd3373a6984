package sampler

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"testing"
)

// TestMT19937 pins the engine to the reference generator: init_genrand
// with 5489 (C++'s std::mt19937 default) gives 3499211612 first and
// 4123659995 as its 10000th output, values the C++ standard quotes.
func TestMT19937(t *testing.T) {
	m := newMT19937(5489)
	if got := m.uint32(); got != 3499211612 {
		t.Fatalf("first output %d, want 3499211612", got)
	}
	for range 9998 {
		m.uint32()
	}
	if got := m.uint32(); got != 4123659995 {
		t.Fatalf("10000th output %d, want 4123659995", got)
	}
	a, b := newMT19937(7), newMT19937(7)
	if hi, lo := a.uint32(), a.uint32(); b.uint64() != uint64(hi)<<32|uint64(lo) {
		t.Fatal("uint64 is not two outputs, the first high")
	}
	if newMT19937(7).uint32() != newMT19937(7+1<<32).uint32() {
		t.Fatal("seeds equal mod 2^32 differ")
	}
}

// torchDigest is a long list as scripts/torch-vectors.py records it.
type torchDigest struct {
	Len    int     `json:"len"`
	Head   []int64 `json:"head"`
	Tail   []int64 `json:"tail"`
	SHA256 string  `json:"sha256"`
}

func digestOf(xs []int64) torchDigest {
	h := sha256.New()
	binary.Write(h, binary.LittleEndian, xs)
	return torchDigest{Len: len(xs), Head: xs[:min(8, len(xs))], Tail: xs[max(len(xs)-8, 0):], SHA256: hex.EncodeToString(h.Sum(nil))}
}

func (d torchDigest) equal(o torchDigest) bool {
	return d.Len == o.Len && slices.Equal(d.Head, o.Head) && slices.Equal(d.Tail, o.Tail) && d.SHA256 == o.SHA256
}

// torchFile is testdata/torch-vectors.json (scripts/torch-vectors.py).
type torchFile struct {
	Torch    string `json:"torch"`
	Randperm []struct {
		N      int64        `json:"n"`
		Seed   uint64       `json:"seed"`
		Perm   []int64      `json:"perm"`
		Digest *torchDigest `json:"digest"`
	} `json:"randperm"`
	Distributed []torchCase `json:"distributed"`
}

type torchCase struct {
	N        int64         `json:"n"`
	World    int           `json:"world"`
	Seed     uint64        `json:"seed"`
	Epoch    int64         `json:"epoch"`
	DropLast bool          `json:"drop_last"`
	Ranks    [][]int64     `json:"ranks,omitempty"`
	Digests  []torchDigest `json:"digests,omitempty"`
}

func loadRandpermVectors(t *testing.T) torchFile {
	t.Helper()
	b, err := os.ReadFile("testdata/torch-vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var f torchFile
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Randperm) == 0 || len(f.Distributed) == 0 {
		t.Fatal("torch-vectors.json holds no cases")
	}
	return f
}

// TestTorchRandpermVectors: TorchRandperm is torch.randperm under
// manual_seed, for seeds past 2^32 too (the engine keeps 32 bits).
func TestTorchRandpermVectors(t *testing.T) {
	f := loadRandpermVectors(t)
	for _, c := range f.Randperm {
		got := TorchRandperm(c.N, c.Seed)
		if c.Digest != nil {
			if d := digestOf(got); !d.equal(*c.Digest) {
				t.Errorf("n=%d seed=%d: %+v, torch %s gives %+v", c.N, c.Seed, d, f.Torch, *c.Digest)
			}
		} else if !slices.Equal(got, c.Perm) {
			t.Errorf("n=%d seed=%d: %v, torch %s gives %v", c.N, c.Seed, got, f.Torch, c.Perm)
		}
	}
}

// rankLists returns every rank's list of d (Rank ignored) for epoch e,
// through Fill and checked against At.
func rankLists(t *testing.T, d Distributed, e int64) [][]int64 {
	t.Helper()
	out := make([][]int64, d.World)
	for r := range d.World {
		d.Rank = r
		ep := d.Epoch(e)
		out[r] = ep.Fill(make([]int64, ep.Len()), 0)
		for i, v := range out[r] {
			if ep.At(int64(i)) != v {
				t.Fatalf("%+v epoch %d: At(%d) = %d, Fill gives %d", d, e, i, ep.At(int64(i)), v)
			}
		}
	}
	return out
}

// TestTorchSamplerVectors: with Order Torch every rank's epoch is
// DistributedSampler's list, padding and drop_last included, for n = 1,
// n < world and large n.
func TestTorchSamplerVectors(t *testing.T) {
	f := loadRandpermVectors(t)
	for _, c := range f.Distributed {
		d := Distributed{N: c.N, World: c.World, Seed: c.Seed, Shuffle: true, DropLast: c.DropLast, Order: Torch}
		got := rankLists(t, d, c.Epoch)
		for r, list := range got {
			if c.Digests != nil {
				if dg := digestOf(list); !dg.equal(c.Digests[r]) {
					t.Errorf("%+v epoch %d rank %d: %+v, torch gives %+v", d, c.Epoch, r, dg, c.Digests[r])
				}
			} else if !slices.Equal(list, c.Ranks[r]) {
				t.Errorf("%+v epoch %d rank %d: %v, torch gives %v", d, c.Epoch, r, list, c.Ranks[r])
			}
		}
	}
}

// TestTorchLive runs torch itself (Debian's, /usr/bin/python3) on random
// cases, each test run new ones.
func TestTorchLive(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no torch run")
	}
	const python = "/usr/bin/python3"
	if err := exec.Command(python, "-c", "import torch").Run(); err != nil {
		t.Skipf("no torch for %s: %v", python, err)
	}
	seed := rand.Uint64()
	t.Logf("cases from seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	var cases []torchCase
	for range 40 {
		c := torchCase{N: 1 + rng.Int64N(3000), World: 1 + rng.IntN(12), Epoch: rng.Int64N(1000), DropLast: rng.IntN(2) == 0}
		switch rng.IntN(3) {
		case 0:
			c.Seed = rng.Uint64N(1 << 16)
		case 1:
			c.Seed = rng.Uint64N(1 << 62)
		default:
			c.N = 1 + rng.Int64N(10) // n < world is frequent
		}
		cases = append(cases, c)
	}
	in, _ := json.Marshal(cases)
	cmd := exec.Command(python, "../scripts/torch-vectors.py", "--cases")
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("torch-vectors.py --cases: %v\n%s", err, stderr.Bytes())
	}
	var want [][][]int64
	if err := json.Unmarshal(out, &want); err != nil || len(want) != len(cases) {
		t.Fatalf("torch answered %d cases for %d: %v", len(want), len(cases), err)
	}
	for i, c := range cases {
		d := Distributed{N: c.N, World: c.World, Seed: c.Seed, Shuffle: true, DropLast: c.DropLast, Order: Torch}
		if got := rankLists(t, d, c.Epoch); !slices.EqualFunc(got, want[i], slices.Equal) {
			t.Errorf("%+v epoch %d:\n got %v\nwant %v", d, c.Epoch, got, want[i])
		}
	}
}

// TestTorchInsideOut checks the shuffle torch uses from TorchLargeN on,
// on small lengths (the threshold is the caller's): each draw is a
// 64-bit number and the result a permutation.
func TestTorchInsideOut(t *testing.T) {
	for _, n := range []int{1, 2, 5, 100, 1000} {
		p := make([]uint32, n)
		randperm(p, newMT19937(3), true)
		seen := make([]bool, n)
		for _, v := range p {
			if seen[v] {
				t.Fatalf("n=%d: %d twice in %v", n, v, p)
			}
			seen[v] = true
		}
		// By hand: the last entry is i = n-1 unless a later draw moved it;
		// the first draw (i = 0) is always 0.
		g := newMT19937(3)
		want := make([]uint32, n)
		for i := range n {
			z := g.uint64() % uint64(i+1)
			want[i], want[z] = want[z], uint32(i)
		}
		if !slices.Equal(p, want) {
			t.Fatalf("n=%d: %v, want %v", n, p, want)
		}
	}
}

// TestTorchLarge checks both shuffles at the threshold against torch: run
// with LOADERD_TORCH_LARGE=1 (1.7 GB, seconds). Debian's torch 1.13
// predates the change, so it is TorchLegacy's oracle at TorchLargeN.
func TestTorchLarge(t *testing.T) {
	if os.Getenv("LOADERD_TORCH_LARGE") == "" {
		t.Skip("set LOADERD_TORCH_LARGE=1 to shuffle 214,748,364 samples")
	}
	for _, c := range []struct {
		n      int64
		legacy bool
		sha    string
	}{
		{TorchLargeN - 1, false, torchLargeBelow},
		{TorchLargeN, true, torchLargeAt},
	} {
		p := make([]int64, c.n)
		randperm(p, newMT19937(3), insideOut(c.n, c.legacy))
		if d := digestOf(p); d.SHA256 != c.sha {
			t.Errorf("n=%d legacy=%t: %+v, torch 1.13 gives sha256 %s", c.n, c.legacy, d, c.sha)
		}
	}
}

func TestParseOrder(t *testing.T) {
	for _, o := range []Order{Uniform, Torch, TorchLegacy} {
		if got, err := ParseOrder(o.String()); got != o || err != nil {
			t.Errorf("ParseOrder(%q) = %v, %v", o, got, err)
		}
	}
	for _, s := range []string{"", "shards", "Torch", "torch:2"} {
		if _, err := ParseOrder(s); !errors.Is(err, ErrOrder) {
			t.Errorf("ParseOrder(%q) = %v, want ErrOrder", s, err)
		}
	}
	if s := Order(9).String(); s != "Order(9)" {
		t.Errorf("Order(9) is %q", s)
	}
}

func TestValidateOrder(t *testing.T) {
	sh, err := NewShards([]Run{{Start: 0, Len: 10, Shard: 0}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		d  Distributed
		ok bool
	}{
		{Distributed{N: 10, World: 1, Order: Torch}, true},
		{Distributed{N: 10, World: 1, Order: TorchLegacy, Shuffle: true}, true},
		{Distributed{N: 10, World: 1, Shards: sh, Shuffle: true}, true},
		{Distributed{N: 10, World: 1, Order: Torch, Shards: sh, Shuffle: true}, false},
		{Distributed{N: 10, World: 1, Order: 7}, false},
	}
	for _, c := range cases {
		err := c.d.Validate()
		if (err == nil) != c.ok || !c.ok && !errors.Is(err, ErrOrder) {
			t.Errorf("%+v: Validate() = %v", c.d, err)
		}
		if ep := c.d.Epoch(0); (ep.Len() > 0) != c.ok {
			t.Errorf("%+v: epoch of %d", c.d, ep.Len())
		}
	}
}

// TestTorchUnshuffled: without Shuffle the order is the identity, as
// DistributedSampler(shuffle=False) is whatever its seed.
func TestTorchUnshuffled(t *testing.T) {
	d := Distributed{N: 5, World: 2, Rank: 1, Seed: 3, Order: Torch}
	if got := d.Epoch(4).Fill(make([]int64, 3), 0); !slices.Equal(got, []int64{1, 3, 0}) {
		t.Fatalf("got %v", got)
	}
}

// TestTorchShared: the ranks of one epoch share one computed order, and
// it lives as long as they do.
func TestTorchShared(t *testing.T) {
	d := Distributed{N: 1000, World: 4, Seed: 77, Shuffle: true, Order: Torch}
	a := d.Epoch(3)
	d.Rank = 2
	b := d.EpochFrom(3, 40)
	if a.torch != b.torch || a.torch == nil {
		t.Fatal("two plans of one epoch computed their order twice")
	}
	if c := d.Epoch(4); c.torch == a.torch {
		t.Fatal("epochs 3 and 4 share an order")
	}
	d.Order = TorchLegacy
	if c := d.Epoch(3); c.torch == a.torch {
		t.Fatal("legacy and current share an order") // equal below TorchLargeN, but keyed apart
	}
}

// TestTorchElasticResume: the elastic resume of docs/RESUME.md works on
// torch's order as on the uniform one (the world changes mid-epoch, the
// rest of torch's epoch order is split anew).
func TestTorchElasticResume(t *testing.T) {
	for _, n := range []int64{5, 37} {
		for _, chain := range elasticChains {
			for _, dropLast := range []bool{false, true} {
				base := Distributed{N: n, Seed: 1<<32 + 3, Shuffle: true, DropLast: dropLast, Order: Torch}
				elasticCase(t, base, chain, 3, false)
			}
		}
	}
}

func BenchmarkTorchPerm(b *testing.B) {
	for _, n := range []int64{50_000, 1_281_167} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				TorchRandperm(n, 42)
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "indices/s")
		})
	}
}

// The sha256 (of little-endian int64s) of Debian's torch 1.13
// randperm(n) under manual_seed(3) for n = TorchLargeN-1 and TorchLargeN,
// computed once (1.5 minutes each): its heads are [3426993 89012687 …]
// and [3426982 89012686 …], alike because both draw 32 bits.
const (
	torchLargeBelow = "045f043761f65a8a635c932543595e1b1058fa04eaa323e15910bf59231da92e"
	torchLargeAt    = "4f7507c1d720b790131447929292376681177ce1f8c28e7fdad82d33fab728b6"
)
