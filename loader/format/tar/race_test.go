//go:build race

package tar

// raceEnabled: under the race detector sync.Pool drops items at random,
// so the decoder pool's steady state allocates.
const raceEnabled = true
