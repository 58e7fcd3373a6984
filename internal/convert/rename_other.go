//go:build !linux

package convert

import "errors"

// renameNoReplace renames src to dst unless dst exists (an error matching
// fs.ErrExist): a check, then a rename.
func renameNoReplace(src, dst string) error { return renameChecked(src, dst) }

// exchange is not available: install moves the old output aside instead.
func exchange(src, dst string) error { return errors.ErrUnsupported }
