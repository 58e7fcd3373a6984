// Package benchmarks implements loaderd's cross-package benchmarks: the
// fused augmentation kernel against a memory-copy ceiling, and (as they are
// added) the loader, pool and wire paths. It holds only _test.go benchmarks
// and has no API; nothing in it is meant for concurrent use by callers.
//
// Run them with, for example:
//
//	go test ./benchmarks/ -run XXX -bench Kernel -benchtime 2s
package benchmarks
