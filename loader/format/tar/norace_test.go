//go:build !race

package tar

const raceEnabled = false
