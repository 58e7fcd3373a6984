package tensor

import (
	"runtime"
	"testing"
)

func TestPlanCPU(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	cases := []struct {
		k, g, wantK, wantG int
	}{
		{4, 3, 4, 3},
		{1, 0, 1, procs},
		{2, 0, 2, max(1, procs/2)},
		{0, 5, min(2, procs), 5},
		{0, 0, min(2, procs), max(1, procs/min(2, procs))},
		{procs + 1, 0, procs + 1, 1},
	}
	for _, tc := range cases {
		if k, g := PlanCPU(tc.k, tc.g); k != tc.wantK || g != tc.wantG {
			t.Errorf("PlanCPU(%d, %d) = %d, %d; want %d, %d", tc.k, tc.g, k, g, tc.wantK, tc.wantG)
		}
	}
}
