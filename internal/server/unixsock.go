package server

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrSocketInUse: a live daemon already answers on the Unix socket path.
var ErrSocketInUse = errors.New("a daemon is already serving on this socket")

// unixListener is a Unix socket this daemon created. Closing it removes the
// path only while the path is still this socket: a daemon started later on
// the same path keeps its own.
type unixListener struct {
	*net.UnixListener
	path string
	fi   os.FileInfo // the socket's inode, as bound: os.SameFile compares device and inode
}

// listenUnix binds path with the given mode. A live daemon on path is an
// error; a stale socket is removed; any other kind of file is left alone
// and refused.
func listenUnix(path string, mode os.FileMode) (*unixListener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("listen %s: the path exists and is not a socket (%s); refusing to remove it", path, fi.Mode().Type())
		}
		c, err := net.DialTimeout("unix", path, time.Second)
		if err == nil {
			c.Close()
			return nil, fmt.Errorf("listen %s: %w", path, ErrSocketInUse)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("listen %s: the socket exists and its state is unclear: %w", path, err)
		}
		if err := os.Remove(path); err != nil { // stale: nobody listens
			return nil, fmt.Errorf("listen %s: remove stale socket: %w", path, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	// Bound owner-only, then opened to mode: never wider than asked, even
	// for the moment in between, whatever the umask.
	old := unix.Umask(0o177)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	unix.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	l.SetUnlinkOnClose(false)
	if err := os.Chmod(path, mode); err != nil {
		l.Close()
		os.Remove(path)
		return nil, fmt.Errorf("listen %s: chmod %v: %w", path, mode, err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	return &unixListener{UnixListener: l, path: path, fi: fi}, nil
}

// Close stops listening and removes the path if it is still this socket.
func (l *unixListener) Close() error {
	err := l.UnixListener.Close()
	if fi, err := os.Lstat(l.path); err == nil && os.SameFile(fi, l.fi) {
		os.Remove(l.path)
	}
	return err
}
