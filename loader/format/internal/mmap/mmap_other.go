//go:build !linux

package mmap

import "os"

// Map reads path into memory where mmap is not wired up.
func Map(path string) ([]byte, error) { return os.ReadFile(path) }

// Unmap does nothing: the garbage collector frees what Map read.
func Unmap([]byte) error { return nil }
