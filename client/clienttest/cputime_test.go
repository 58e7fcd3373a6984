package clienttest

import "testing"

// TestCPUTimeAdvances burns CPU and checks the clock saw it.
func TestCPUTimeAdvances(t *testing.T) {
	t0 := CPUTime()
	x := uint64(1)
	for CPUTime()-t0 < 5e6 { // 5 ms of CPU
		for range 100000 {
			x = x*6364136223846793005 + 1
		}
	}
	if x == 0 || CPUTime() <= t0 {
		t.Fatalf("CPU time did not advance: %v then %v", t0, CPUTime())
	}
}
