package cuda

import (
	"strings"
	"testing"
	"time"

	"github.com/loaderd/loaderd/trainer/tensor"
)

// SetProfile records every kernel under the op that launched it and every
// GEMM under its shape, and records nothing once it is off again.
func TestEmulatedProfile(t *testing.T) {
	d := openEmu(t, true)
	d.SetProfile(true)
	trainSteps(t, []tensor.Device{d}, 2, 4)
	prof := d.Profile()
	seen := map[string]bool{}
	for i, p := range prof {
		if p.Calls <= 0 || p.Total <= 0 {
			t.Errorf("%s: %d calls, %v", p.Op, p.Calls, p.Total)
		}
		if i > 0 && p.Total > prof[i-1].Total {
			t.Errorf("not sorted: %s %v after %s %v", p.Op, p.Total, prof[i-1].Op, prof[i-1].Total)
		}
		switch {
		case strings.HasPrefix(p.Op, "gemm "):
			seen["gemm"] = true
		case strings.HasSuffix(p.Op, " im2col_f32"):
			seen["im2col"] = true
		case strings.HasSuffix(p.Op, " sgd_f32"):
			seen["sgd"] = true
		}
	}
	for _, k := range []string{"gemm", "im2col", "sgd"} {
		if !seen[k] {
			t.Errorf("no %s in the profile: %v", k, prof)
		}
	}
	table := profileTable(prof, time.Second, 2)
	if !strings.Contains(table, "gemm NN m=") && !strings.Contains(table, "gemm NT m=") && !strings.Contains(table, "gemm TN m=") {
		t.Errorf("table names no GEMM shape:\n%s", table)
	}
	d.SetProfile(false)
	trainSteps(t, []tensor.Device{d}, 1, 4)
	if p := d.Profile(); len(p) != 0 {
		t.Errorf("profile off, yet %d ops recorded", len(p))
	}
}
