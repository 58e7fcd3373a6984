package pinned

import (
	"errors"
	"log/slog"
	"sync/atomic"
)

// lockWarned makes the mlock fallback warning once per process: a daemon
// that builds many pools under a low RLIMIT_MEMLOCK should not spam its log.
var lockWarned atomic.Bool

// lockMem tries to mlock b. On failure it undoes any partial lock, warns
// once and reports false: the memory stays usable, only pageable.
func lockMem(b []byte, name string) bool {
	if len(b) == 0 {
		return false
	}
	err := mlockFn(b)
	if err == nil {
		return true
	}
	_ = munlockFn(b) // a failed mlock may leave a prefix locked
	if errors.Is(err, errors.ErrUnsupported) {
		return false // no locking on this platform (mem_other.go): nothing to warn about, nothing to raise
	}
	if lockWarned.CompareAndSwap(false, true) {
		slog.Warn("pinned: mlock failed; falling back to pageable memory",
			"name", name, "bytes", len(b), "err", err,
			"hint", "raise RLIMIT_MEMLOCK (ulimit -l) or grant CAP_IPC_LOCK")
	}
	return false
}
