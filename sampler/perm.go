package sampler

import "math/bits"

// rounds is the number of Feistel rounds. Four already give a strong
// pseudo-random permutation for random round functions; six buy margin for
// the tiny domains (a few bits per half) that small datasets produce.
const rounds = 6

// golden is 2^64/φ, the splitmix64 increment.
const golden = 0x9e3779b97f4a7c15

// mix64 is the splitmix64 finaliser: a bijective 64-bit mixer with full
// avalanche, used for key schedules and as the Feistel round function.
func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// EpochKey is the permutation key of epoch e under seed:
//
//	EpochKey(seed, e) = mix64(seed ^ mix64(uint64(e) + 0x9e3779b97f4a7c15))
//
// where mix64 is the splitmix64 finaliser. mix64 is a bijection, so distinct
// epochs of one seed always get distinct keys.
func EpochKey(seed uint64, epoch int64) uint64 {
	return mix64(seed ^ mix64(uint64(epoch)+golden))
}

// Perm is a keyed pseudo-random bijection on [0, n), evaluated per position
// in O(1) memory. It is a balanced Feistel network over the smallest even
// number of bits b ≥ ⌈log2 n⌉, with cycle-walking to stay below n;
// the Feistel domain 2^b is under 4n, so a walk takes fewer than four steps
// on average. Round r computes F(R) = mix64(R ^ k_r) on the right half, with
// round keys k_r = mix64(key + (r+1)·0x9e3779b97f4a7c15).
//
// The zero Perm is the empty permutation. A Perm is an immutable value.
type Perm struct {
	n    uint64
	half uint   // bits per Feistel half
	mask uint64 // (1<<half) - 1
	key  [rounds]uint64
}

// NewPerm returns the permutation of [0, n) keyed by key. n ≤ 0 gives the
// empty permutation. Construction is constant time for any n.
func NewPerm(n int64, key uint64) Perm {
	if n <= 0 {
		return Perm{}
	}
	b := bits.Len64(uint64(n - 1)) // ⌈log2 n⌉; 0 for n == 1, a one-point domain
	b += b & 1
	p := Perm{n: uint64(n), half: uint(b / 2), mask: 1<<uint(b/2) - 1}
	s := key
	for r := range p.key {
		s += golden
		p.key[r] = mix64(s)
	}
	return p
}

// Len returns n.
func (p Perm) Len() int64 { return int64(p.n) }

// At returns the image of i, or -1 when i is outside [0, n).
func (p Perm) At(i int64) int64 {
	if i < 0 || uint64(i) >= p.n {
		return -1
	}
	// Cycle-walk: i's cycle under the domain permutation returns to i < n,
	// so it meets a value below n.
	x := uint64(i)
	for {
		x = p.encrypt(x)
		if x < p.n {
			return int64(x)
		}
	}
}

// Inverse returns the i with At(i) == j, or -1 when j is outside [0, n).
func (p Perm) Inverse(j int64) int64 {
	if j < 0 || uint64(j) >= p.n {
		return -1
	}
	x := uint64(j)
	for {
		x = p.decrypt(x)
		if x < p.n {
			return int64(x)
		}
	}
}

// at4 replaces each x[j] (all < n) by its image. The four Feistel chains
// run in lockstep so that the CPU overlaps their multiplies; a lone At is
// one long dependency chain.
func (p Perm) at4(x *[4]uint64) {
	h, m := p.half, p.mask
	l0, r0 := x[0]>>h, x[0]&m
	l1, r1 := x[1]>>h, x[1]&m
	l2, r2 := x[2]>>h, x[2]&m
	l3, r3 := x[3]>>h, x[3]&m
	for _, k := range p.key {
		l0, r0 = r0, l0^(mix64(r0^k)&m)
		l1, r1 = r1, l1^(mix64(r1^k)&m)
		l2, r2 = r2, l2^(mix64(r2^k)&m)
		l3, r3 = r3, l3^(mix64(r3^k)&m)
	}
	x[0], x[1], x[2], x[3] = l0<<h|r0, l1<<h|r1, l2<<h|r2, l3<<h|r3
	for j := range x {
		for x[j] >= p.n { // finish the cycle-walk lane by lane
			x[j] = p.encrypt(x[j])
		}
	}
}

func (p Perm) encrypt(x uint64) uint64 {
	l, r := x>>p.half, x&p.mask
	for _, k := range p.key {
		l, r = r, l^(mix64(r^k)&p.mask)
	}
	return l<<p.half | r
}

func (p Perm) decrypt(x uint64) uint64 {
	l, r := x>>p.half, x&p.mask
	for i := len(p.key) - 1; i >= 0; i-- {
		l, r = r^(mix64(l^p.key[i])&p.mask), l
	}
	return l<<p.half | r
}
