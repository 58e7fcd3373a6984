//go:build !darwin

package server

// physMem is the machine's memory where there is no /proc/meminfo; on
// Linux memTotal reads /proc/meminfo instead. 0 if unknown.
func physMem() int64 { return 0 }
