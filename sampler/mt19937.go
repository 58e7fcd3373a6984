package sampler

// mt19937 is the 32-bit Mersenne Twister (Matsumoto and Nishimura, 1998)
// in the form torch's CPU generator runs it, so that TorchRandperm draws
// the very numbers torch.randperm draws. It is the textbook generator:
// torch's engine differs from C++'s std::mt19937 only in how it is seeded
// (see newMT19937), not in its recurrence or tempering.
type mt19937 struct {
	state [mtN]uint32
	next  int // index of the next word to temper; mtN: regenerate first
}

// The MT19937 parameters: degree, middle word, twist matrix, the initial
// multiplier of the seeding recurrence, and the tempering masks.
const (
	mtN       = 624
	mtM       = 397
	mtMatrixA = 0x9908b0df
	mtUpper   = 0x80000000 // the most significant bit of a word
	mtLower   = 0x7fffffff // the 31 bits below it
	mtInit    = 1812433253
	mtTemperB = 0x9d2c5680
	mtTemperC = 0xefc60000
)

// newMT19937 seeds the generator as torch.Generator().manual_seed(seed)
// does: torch keeps the seed as 64 bits (initial_seed() returns it whole)
// but its engine is initialised from the low 32 bits only, with the
// standard init_genrand recurrence. So seeds that agree modulo 2^32 give
// the same numbers, in torch and here.
func newMT19937(seed uint64) *mt19937 {
	m := &mt19937{next: mtN}
	m.state[0] = uint32(seed)
	for j := 1; j < mtN; j++ {
		p := m.state[j-1]
		m.state[j] = mtInit*(p^p>>30) + uint32(j)
	}
	return m
}

// regenerate computes the next mtN words of the state in place. Word j
// mixes words j and j+1 and adds word j+M, all indices mod N; the three
// loops are the ranges where those do not wrap, so that the hot loop has
// no modulo.
func (m *mt19937) regenerate() {
	s := &m.state
	j := 0
	for ; j < mtN-mtM; j++ {
		s[j] = s[j+mtM] ^ twist(s[j], s[j+1])
	}
	for ; j < mtN-1; j++ {
		s[j] = s[j+mtM-mtN] ^ twist(s[j], s[j+1])
	}
	s[mtN-1] = s[mtM-1] ^ twist(s[mtN-1], s[0])
	m.next = 0
}

// twist joins u's top bit to v's low 31 and multiplies by the twist
// matrix: a shift and, when the low bit is set, MATRIX_A.
func twist(u, v uint32) uint32 {
	y := u&mtUpper | v&mtLower
	return y>>1 ^ -(y&1)&mtMatrixA
}

// uint32 returns the next 32-bit output: torch's CPUGeneratorImpl::random.
func (m *mt19937) uint32() uint32 {
	if m.next == mtN {
		m.regenerate()
	}
	y := m.state[m.next]
	m.next++
	y ^= y >> 11
	y ^= y << 7 & mtTemperB
	y ^= y << 15 & mtTemperC
	return y ^ y>>18
}

// uint64 returns two outputs joined, the first in the high half: torch's
// CPUGeneratorImpl::random64.
func (m *mt19937) uint64() uint64 {
	hi := m.uint32()
	return uint64(hi)<<32 | uint64(m.uint32())
}
