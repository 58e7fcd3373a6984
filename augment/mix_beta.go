package augment

import "math"

// Beta(α, α) by two Gamma(α) draws, X/(X+Y), each Gamma by Marsaglia and
// Tsang's method ("A simple method for generating gamma variables", 2000):
// for a ≥ 1, d = a - 1/3, c = 1/√(9d), draw a standard normal x, take
// v = (1 + c·x)³ and accept d·v when v > 0 and
// log u < x²/2 + d - d·v + d·log v for a uniform u. For a < 1 the draw is
// Gamma(a+1)·u^(1/a). Every value comes from the batch's key at a fixed
// counter, so the result is a pure function of it.
//
// The draws are kept as logarithms: for the small α of mixup recipes
// (0.1, 0.2) u^(1/α) underflows float64 often enough that X/(X+Y) would
// be 0/0, while log X - log Y is always finite. Each Gamma draw tries at
// most maxGammaTries times (three uniforms a try; acceptance is above 95%
// for every a ≥ 1, so running out has probability below 0.05^64); should
// it run out it returns d, the distribution's centre.

const maxGammaTries = 64

// betaSym returns a Beta(alpha, alpha) value in [0, 1].
func betaSym(key uint64, alpha float64) float64 {
	lx, _ := logGamma(key, streamMixGammaX, alpha)
	ly, _ := logGamma(key, streamMixGammaY, alpha)
	// X/(X+Y) = 1/(1 + e^(ly-lx)), exact at the ends.
	return 1 / (1 + math.Exp(ly-lx))
}

// logGamma returns log of a Gamma(a, 1) draw from a stream of key, and the
// number of tries it took.
func logGamma(key, stream uint64, a float64) (float64, int) {
	boost := 0.0
	if a < 1 {
		// Gamma(a) = Gamma(a+1)·u^(1/a); u in (0, 1] keeps the log finite.
		u := 1 - unitAt(key, stream, 3*maxGammaTries)
		boost = math.Log(u) / a
		a++
	}
	d := a - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for j := range uint64(maxGammaTries) {
		x := normal64(key, stream, j)
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := 1 - unitAt(key, stream, 3*j+2) // (0, 1]
		if math.Log(u) < 0.5*x*x+d-d*v+d*math.Log(v) {
			return math.Log(d*v) + boost, int(j) + 1
		}
	}
	return math.Log(d) + boost, maxGammaTries
}

// normal64 is a Box-Muller standard normal from try j's first two uniforms.
func normal64(key, stream, j uint64) float64 {
	u1 := 1 - unitAt(key, stream, 3*j) // (0, 1]: the log stays finite
	u2 := unitAt(key, stream, 3*j+1)
	return math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
}
