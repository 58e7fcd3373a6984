//go:build race

package trainer

// raceOn shrinks the internal tests that train under the race detector.
const raceOn = true
