package loader_test

import (
	"testing"

	"github.com/loaderd/loaderd/client/wire"
	"github.com/loaderd/loaderd/loader"
)

// TestMaxBatchSizeIsTheWires: a batch the daemon's Open refuses is not
// one the loader takes either, and the other way round. (A test, so that
// client/wire need not import the loader, nor the loader the wire.)
func TestMaxBatchSizeIsTheWires(t *testing.T) {
	if loader.MaxBatchSize != wire.MaxBatchSize {
		t.Fatalf("loader.MaxBatchSize %d, client/wire.MaxBatchSize %d: keep them equal", loader.MaxBatchSize, wire.MaxBatchSize)
	}
}
