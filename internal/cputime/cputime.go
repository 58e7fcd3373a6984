// Package cputime implements reading the process's CPU time, for
// benchmarks that report CPU per image beside images/s: on a machine
// shared with other work, images/s measures the share a benchmark got,
// while CPU time per image says what idle cores would give. Process is
// safe for concurrent use.
package cputime

import (
	"syscall"
	"time"
)

// Process returns the user plus system time of the whole process, all
// threads, or 0 if the kernel will not say.
func Process() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
