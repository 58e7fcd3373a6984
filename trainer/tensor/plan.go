package tensor

import "runtime"

// PlanCPU picks the CPU devices to train on: k devices of g goroutines
// each. k ≤ 0 picks 2 devices when GOMAXPROCS ≥ 2 (else 1); g ≤ 0 shares
// GOMAXPROCS among them: on a 2-core machine 2 × 1, measured the fastest
// data-parallel layout. It is safe for concurrent use.
func PlanCPU(k, g int) (devices, goroutines int) {
	procs := runtime.GOMAXPROCS(0)
	if k <= 0 {
		k = min(2, procs)
	}
	if g <= 0 {
		g = max(1, procs/k)
	}
	return k, g
}
