package loader_test

import (
	"testing"

	"github.com/loaderd/loaderd/loader"
)

// TestCheckBatchSize: the one rule for a batch size, 1..MaxBatchSize, that
// New, the daemon's Open and loaderd bench all apply.
func TestCheckBatchSize(t *testing.T) {
	for _, tt := range []struct {
		n    int
		want string
	}{
		{1, ""},
		{loader.MaxBatchSize, ""},
		{0, "batch size 0 (want 1..16384)"},
		{-3, "batch size -3 (want 1..16384)"},
		{loader.MaxBatchSize + 1, "batch size 16385 (want 1..16384)"},
	} {
		got := ""
		if err := loader.CheckBatchSize(tt.n); err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("CheckBatchSize(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}
