package trainer

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// writeUnnamed writes data into an unnamed file in dir (O_TMPFILE),
// syncs it, and only then links it as dir/PREFIXNNN: a writer killed
// before that leaves nothing on disk. ok is false where the file system
// has no O_TMPFILE or /proc is not mounted: writeNamed does it then.
func writeUnnamed(dir, prefix string, data []byte) (name string, ok bool, err error) {
	if !useUnnamed {
		return "", false, nil
	}
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return "", false, nil
	}
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		return "", true, err
	}
	if err := f.Sync(); err != nil {
		return "", true, err
	}
	// linkat(2) with AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH; the /proc
	// link of the descriptor does not.
	proc := "/proc/self/fd/" + strconv.Itoa(fd)
	for range 100 {
		name = filepath.Join(dir, prefix+strconv.FormatUint(uint64(rand.Uint32()), 10))
		err = unix.Linkat(unix.AT_FDCWD, proc, unix.AT_FDCWD, name, unix.AT_SYMLINK_FOLLOW)
		if err != unix.EEXIST {
			break
		}
	}
	if err != nil {
		return "", false, nil
	}
	return name, true, nil
}
