package sampler

import (
	"sync"
	"weak"
)

// torchPerm is one epoch's torch order, shared read-only by every Epoch
// that plans from it: small holds it when N ≤ 2^32, big otherwise.
type torchPerm struct {
	small []uint32
	big   []int64
}

func (t *torchPerm) at(g uint64) int64 {
	if t.small != nil {
		return int64(t.small[g])
	}
	return t.big[g]
}

// torchKey identifies a torch order: torch seeds with 32 bits.
type torchKey struct {
	n      int64
	seed   uint32
	legacy bool
}

// torchPerms remembers the torch orders in use, so that the ranks of one
// job served by one daemon (or a stream and its resumption) compute and
// hold each epoch's order once. It holds them weakly: an order lives as
// long as some Epoch plans from it.
var torchPerms struct {
	sync.Mutex
	m map[torchKey]weak.Pointer[torchPerm]
}

// torchEpoch returns the torch order of n samples under seed, computing
// it unless a live Epoch already holds it.
func torchEpoch(n int64, seed uint64, legacy bool) *torchPerm {
	k := torchKey{n: n, seed: uint32(seed), legacy: legacy}
	torchPerms.Lock()
	if t := torchPerms.m[k].Value(); t != nil {
		torchPerms.Unlock()
		return t
	}
	torchPerms.Unlock()

	t := new(torchPerm)
	g := newMT19937(seed)
	if n <= 1<<32 {
		t.small = make([]uint32, n)
		randperm(t.small, g, insideOut(n, legacy))
	} else {
		t.big = make([]int64, n)
		randperm(t.big, g, insideOut(n, legacy))
	}

	torchPerms.Lock()
	defer torchPerms.Unlock()
	if old := torchPerms.m[k].Value(); old != nil {
		return old // another stream computed it meanwhile
	}
	if torchPerms.m == nil {
		torchPerms.m = make(map[torchKey]weak.Pointer[torchPerm])
	}
	for key, w := range torchPerms.m {
		if w.Value() == nil {
			delete(torchPerms.m, key)
		}
	}
	torchPerms.m[k] = weak.Make(t)
	return t
}
