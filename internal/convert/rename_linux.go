package convert

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// renameNoReplace renames src to dst unless dst exists (an error matching
// fs.ErrExist), in one step: nothing created at dst meanwhile is
// replaced. File systems without RENAME_NOREPLACE get a check, then a
// rename.
func renameNoReplace(src, dst string) error {
	err := unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		return renameChecked(src, dst)
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: src, New: dst, Err: err}
	}
	return nil
}

// exchange swaps the names src and dst, both existing, in one step.
func exchange(src, dst string) error {
	if err := unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, unix.RENAME_EXCHANGE); err != nil {
		return &os.LinkError{Op: "exchange", Old: src, New: dst, Err: err}
	}
	return nil
}
