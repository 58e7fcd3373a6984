//go:build race

package imagedec

// raceEnabled: under the race detector sync.Pool drops items at random,
// so a pool's steady state allocates.
const raceEnabled = true
