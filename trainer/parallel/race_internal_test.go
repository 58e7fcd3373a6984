//go:build race

package parallel

// raceEnabled shortens the slowest tests under the race detector.
const raceEnabled = true
