//go:build !(linux && (amd64 || arm64))

package cuda

import (
	"runtime"
	"testing"
)

// The emulator (emu_test.go) builds its stand-in for libcuda as a Linux
// shared library; elsewhere the tests that run on it are skipped.
func openEmu(t *testing.T, blas bool) *Device {
	t.Helper()
	t.Skipf("cuda: the emulated device is not supported on %s/%s (needs linux/amd64 or linux/arm64)", runtime.GOOS, runtime.GOARCH)
	return nil
}
