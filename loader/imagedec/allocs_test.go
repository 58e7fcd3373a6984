package imagedec

import (
	"runtime"
	"runtime/debug"
	"testing"
)

// allocsPerRun is testing.AllocsPerRun, robust to what is not the code
// under test: it counts every allocation in the process, so goroutines
// an earlier test left winding down count too, and under a loaded CI
// machine they do. The decoders come from a sync.Pool, which a
// collection empties. So: one P, the collector paused, and the least of
// three measures — an allocation of the path itself shows in all three.
func allocsPerRun(runs int, f func()) float64 {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	n := testing.AllocsPerRun(runs, f)
	for try := 1; try < 3 && n != 0; try++ {
		n = min(n, testing.AllocsPerRun(runs, f))
	}
	return n
}
