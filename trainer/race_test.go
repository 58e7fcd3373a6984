//go:build race

package trainer_test

// raceEnabled shrinks the end-to-end training tests under the race
// detector, which slows the kernels' Go loops about twentyfold: they still
// train, stop and resume through every goroutine, on less data.
const raceEnabled = true
