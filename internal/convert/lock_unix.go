//go:build unix

package convert

import (
	"os"

	"golang.org/x/sys/unix"
)

// tryLock opens path (a directory when dir is set) without following a
// link and takes its exclusive flock without waiting: false when another
// open file holds it (a live run) or it cannot be opened.
func tryLock(path string, dir bool) (*os.File, bool) {
	flags := os.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	if dir {
		flags |= unix.O_DIRECTORY
	}
	f, err := os.OpenFile(path, flags, 0)
	if err != nil {
		return nil, false
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, false
	}
	return f, true
}

// lockWait takes f's exclusive flock, waiting while removeStale holds it.
func lockWait(f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if err != unix.EINTR {
			return err
		}
	}
}
