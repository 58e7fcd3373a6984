package loader

import (
	"os"
	"testing"
)

// skipWithoutFaultAddress skips a test that reads past the end of a
// truncated mapping under qemu-user (scripts/cross.sh sets
// LOADERD_QEMU_USER): qemu delivers the SIGBUS without the fault's
// address (si_addr 0), so no mapping can be named, while the kernels of
// real arm64 and amd64 machines give it.
func skipWithoutFaultAddress(t *testing.T) {
	t.Helper()
	if os.Getenv("LOADERD_QEMU_USER") != "" {
		t.Skip("qemu-user reports SIGBUS without its address")
	}
}
