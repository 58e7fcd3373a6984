//go:build !linux

package loader

import "os"

// mapFile reads path into memory where mmap is not wired up.
func mapFile(path string) ([]byte, error) { return os.ReadFile(path) }

func unmapFile([]byte) error { return nil }
