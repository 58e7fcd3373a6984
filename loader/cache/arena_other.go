//go:build !linux

package cache

// newArena allocates the arena on the Go heap where mmap is not wired up.
func newArena(n int64) ([]byte, error) { return make([]byte, n), nil }

// dropArena does nothing: the garbage collector frees the arena once no
// view of it is left.
func dropArena([]byte) {}
