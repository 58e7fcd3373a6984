//go:build !race

package imagedec

const raceEnabled = false
