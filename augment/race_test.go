//go:build race

package augment

// raceEnabled: the race detector's sync.Pool drops items at random, so
// Apply's pooled scratch allocates now and then.
const raceEnabled = true
