package augment

import "math/bits"

// The random parameters of a sample are a pure function of (seed, epoch,
// index): a counter-based generator with no state to share or to restore on
// resume. The key mixes the three inputs through several splitmix64
// finalisers; each kind of draw has its own stream so adding a flip never
// moves a crop, and a stream's j-th value is mix(key + (stream<<32 + j)·γ).

const golden = 0x9e3779b97f4a7c15 // 2^64/φ, splitmix64's increment

// Streams of draws (see drawKey).
const (
	streamTop = iota
	streamLeft
	streamFlip
	streamScale // random_resized_crop: area fraction of try j
	streamRatio // and its log aspect ratio
	streamBoxY  // the box's corner, once a try fits
	streamBoxX

	// The photometric ops (photostage.go, policy.go) and random_erasing.
	streamJitterOrder // Fisher-Yates step i in slot(·, i)
	streamJitter      // factor of part k at j = k
	streamGray
	streamBlur
	streamPolicy     // sub-policy or operation (slot i for RandAugment's i-th)
	streamPolicyProb // AutoAugment's step i at j = i
	streamPolicySign // operation i's sign bit at j = i
	streamPolicyMag  // TrivialAugmentWide's bin
	streamErase      // whether to erase
	streamEraseScale // area fraction of try j
	streamEraseRatio // and its log aspect ratio
	streamEraseY     // the box's corner, once a try fits
	streamEraseX
	streamEraseNoise // the key of value=random's noise
	streamNoise      // within that key: two uniforms per normal value
)

// mix64 is splitmix64's finaliser (Stafford's variant 13): a bijection of
// uint64 with full avalanche.
func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// drawKey mixes (seed, epoch, index) into one key. Each input passes its
// own finaliser round before it is folded in, so nearby values of any one
// of them give unrelated keys.
func drawKey(seed uint64, epoch, index int64) uint64 {
	k := mix64(seed + golden)
	k = mix64(k ^ mix64(uint64(epoch)+0x6a09e667f3bcc909)) // √2, √3 fractions:
	k = mix64(k ^ mix64(uint64(index)+0xbb67ae8584caa73b)) // distinct offsets
	return mix64(k + golden)
}

// rand64 returns the j-th 64-bit value of a stream.
func rand64(key uint64, stream, j uint64) uint64 {
	return mix64(key + (stream<<32+j+1)*golden)
}

// uniform returns an unbiased integer in [0, n) for n ≥ 1 by Lemire's
// multiply-and-reject: a value whose low product falls below 2^64 mod n is
// rejected and the stream's next value is used.
func uniform(key, stream, n uint64) uint64 {
	hi, lo := bits.Mul64(rand64(key, stream, 0), n)
	if lo < n {
		t := -n % n
		for j := uint64(1); lo < t; j++ {
			hi, lo = bits.Mul64(rand64(key, stream, j), n)
		}
	}
	return hi
}

// unit returns a float64 uniform in [0, 1) with 53 random bits.
func unit(key, stream uint64) float64 { return unitAt(key, stream, 0) }

// unitAt is unit for the stream's j-th value.
func unitAt(key, stream, j uint64) float64 {
	return float64(rand64(key, stream, j)>>11) * 0x1p-53
}
