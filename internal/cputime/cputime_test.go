package cputime

import "testing"

// TestProcessAdvances burns CPU and checks the clock saw it.
func TestProcessAdvances(t *testing.T) {
	t0 := Process()
	x := uint64(1)
	for Process()-t0 < 5e6 { // 5 ms of CPU
		for range 100000 {
			x = x*6364136223846793005 + 1
		}
	}
	if x == 0 || Process() <= t0 {
		t.Fatalf("CPU time did not advance: %v then %v", t0, Process())
	}
}
