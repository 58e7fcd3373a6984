package all_test

import (
	"slices"
	"testing"

	"github.com/loaderd/loaderd/loader"
	_ "github.com/loaderd/loaderd/loader/format/all"
)

// TestFormats: importing all registers every format loaderd ships (the
// list cmd/loaderd/formats.go imports too).
func TestFormats(t *testing.T) {
	want := []string{"arrow", "cifar", "cifar100-coarse", "folder", "parquet", "synthetic", "tar"}
	if got := loader.Formats(); !slices.Equal(got, want) {
		t.Fatalf("Formats() = %v, want %v", got, want)
	}
}
