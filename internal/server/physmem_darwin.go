package server

import "golang.org/x/sys/unix"

// physMem is the machine's memory where there is no /proc/meminfo: on
// macOS, sysctl hw.memsize. 0 if unknown.
func physMem() int64 {
	n, err := unix.SysctlUint64("hw.memsize")
	if err != nil || n > 1<<62 {
		return 0
	}
	return int64(n)
}
