//go:build !linux

package trainer

// writeUnnamed is Linux's O_TMPFILE path; elsewhere writeNamed does it.
func writeUnnamed(dir, prefix string, data []byte) (string, bool, error) { return "", false, nil }
