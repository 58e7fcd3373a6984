package sampler

import (
	"errors"
	"fmt"
	"math"
)

// ErrOrder reports an Order that is unknown, or a torch order asked for
// together with a shard order (Distributed.Validate).
var ErrOrder = errors.New("sampler: invalid order")

// TorchLargeN is the dataset size from which torch.randperm changed
// algorithm in early 2025 (pytorch/pytorch#143682): for n below it every
// torch release runs the same shuffle; from it on, releases with the
// change draw 64-bit numbers (order Torch) and older ones keep drawing
// 32-bit numbers (TorchLegacy). It is ⌊(2^32-1)/20⌋.
const TorchLargeN = math.MaxUint32 / 20

// Order names the shuffled order of an epoch, the permutation that
// Distributed pads or cuts and splits among the ranks (Distributed.Order).
// It applies only when Distributed.Shuffle is set.
type Order uint8

const (
	// Uniform is loaderd's own order: the keyed permutation
	// NewPerm(N, EpochKey(Seed, e)), or the Shards order when
	// Distributed.Shards is set. It costs no memory and no set-up.
	Uniform Order = iota
	// Torch is the order of PyTorch's DistributedSampler: epoch e is
	// TorchRandperm(N, Seed+e), what torch.randperm(N) returns under
	// torch.Generator().manual_seed(Seed+e). It is computed whole at
	// the start of each epoch: O(N) time, 4 bytes per sample (8 past
	// 2^32 samples).
	Torch
	// TorchLegacy is Torch as torch releases from before the change
	// at TorchLargeN compute it (1.x among them): it differs from Torch
	// only when N ≥ TorchLargeN.
	TorchLegacy
)

var orderNames = [...]string{Uniform: "uniform", Torch: "torch", TorchLegacy: "torch:legacy"}

// String returns the order's name as the dataset option order= spells it.
func (o Order) String() string {
	if int(o) < len(orderNames) {
		return orderNames[o]
	}
	return fmt.Sprintf("Order(%d)", o)
}

// ParseOrder returns the Order that String names.
func ParseOrder(s string) (Order, error) {
	for o, name := range orderNames {
		if s == name {
			return Order(o), nil
		}
	}
	return 0, fmt.Errorf("%w: %q (want uniform, torch or torch:legacy)", ErrOrder, s)
}

func (o Order) torch() bool { return o == Torch || o == TorchLegacy }

// TorchRandperm returns what torch.randperm(n, generator=g) returns on
// the CPU for g = torch.Generator().manual_seed(seed), in torch releases
// from early 2025 on (and in all of them for n < TorchLargeN). Only the
// low 32 bits of seed matter, as in torch. n ≤ 0 gives an empty list.
//
// Torch's shuffle, which this follows: for n < TorchLargeN, start from
// the identity and for i = 0 … n-2 swap entry i with entry i + r mod
// (n-i), r a 32-bit output of the generator; from TorchLargeN on, fill
// entry i = 0 … n-1 by the "inside-out" shuffle, z = r mod (i+1) for a
// 64-bit r (two outputs, the first high), entry i takes entry z's value
// and entry z takes i.
func TorchRandperm(n int64, seed uint64) []int64 {
	if n <= 0 {
		return []int64{}
	}
	p := make([]int64, n)
	randperm(p, newMT19937(seed), insideOut(n, false))
	return p
}

// insideOut reports whether torch shuffles n samples with the inside-out
// shuffle of 64-bit draws, rather than swaps by 32-bit ones.
func insideOut(n int64, legacy bool) bool { return n >= TorchLargeN && !legacy }

// randperm fills p with torch's permutation of [0, len(p)) drawn from g,
// by the shuffle that insideOut picks for len(p).
func randperm[T uint32 | int64](p []T, g *mt19937, inside bool) {
	n := int64(len(p))
	if !inside {
		for i := range p {
			p[i] = T(i)
		}
		for i := int64(0); i < n-1; i++ {
			// torch's 64-bit r % (n-i), in 32 bits where n-i fits
			// them (a 64-bit division costs far more); r < n-i else.
			j := i
			if r := g.uint32(); n-i <= math.MaxUint32 {
				j += int64(r % uint32(n-i))
			} else {
				j += int64(r)
			}
			p[i], p[j] = p[j], p[i]
		}
		return
	}
	for i := range n {
		z := int64(g.uint64() % uint64(i+1))
		p[i] = p[z]
		p[z] = T(i)
	}
}
